package s3store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/objectstore"
	"github.com/caravan-nomad/caravan/driver/store/storetest"
)

// TestNewReportsTheFieldAtStart checks that a misconfigured store fails in
// New (the plugin's start), naming the field, against the real server.
func TestNewReportsTheFieldAtStart(t *testing.T) {
	srv := requireServer(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	deadAddr := closed.Addr().String()
	must.NoError(t, closed.Close())

	cases := map[string]struct {
		edit  func(*Config)
		field string
	}{
		"bad endpoint":   {func(c *Config) { c.Endpoint = deadAddr }, "store.endpoint"},
		"missing bucket": {func(c *Config) { c.Bucket = "no-such-bucket-here" }, "store.bucket"},
		"wrong secret":   {func(c *Config) { c.SecretAccessKey = "wrong" }, "store.credentials_file"},
		"unknown key":    {func(c *Config) { c.AccessKeyID = "nobody" }, "store.credentials_file"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := srv.newBucket(t)
			tc.edit(&c)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := New(ctx, c)
			must.Error(t, err)
			must.StrContains(t, err.Error(), tc.field)
			must.StrNotContains(t, err.Error(), testSK)
			t.Log(err)
		})
	}
	_, err = New(context.Background(), srv.newBucket(t))
	must.NoError(t, err)
}

// TestStaleMultipartUploadsAborted leaves a multipart upload behind, as a
// writer killed mid-upload does, and checks that GC finds and aborts it.
func TestStaleMultipartUploadsAborted(t *testing.T) {
	srv := requireServer(t)
	c := srv.newBucket(t)
	b, err := newBackend(c)
	must.NoError(t, err)
	ctx := context.Background()
	up, err := b.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(c.Bucket), Key: aws.String(b.prefix + "chunks/ab/crashed"),
	})
	must.NoError(t, err)
	_, err = b.client.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: aws.String(c.Bucket), Key: up.Key, UploadId: up.UploadId, PartNumber: aws.Int32(1),
		Body: bytesReader(make([]byte, 5<<20)),
	})
	must.NoError(t, err)
	pending := func() int {
		out, err := b.client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(c.Bucket), Prefix: aws.String(b.prefix)})
		must.NoError(t, err)
		return len(out.Uploads)
	}
	must.Eq(t, 1, pending())

	// Within the grace period the upload may be a live writer's: kept.
	opts := storetest.Options()
	opts.GCGrace = time.Hour
	s, err := objectstore.Open(b, opts)
	must.NoError(t, err)
	must.NoError(t, s.Sweep(ctx))
	must.Eq(t, 1, pending())

	opts.GCGrace = -1
	s, err = objectstore.Open(b, opts)
	must.NoError(t, err)
	must.NoError(t, s.Sweep(ctx))
	must.Eq(t, 0, pending())
}

// TestSlowDownRetried puts a proxy answering 503 SlowDown to every fifth
// request in front of the real server: commits and restores succeed,
// retried with backoff.
func TestSlowDownRetried(t *testing.T) {
	srv := requireServer(t)
	var n, refused atomic.Int64
	b := proxiedBackend(t, srv, func(w http.ResponseWriter, r *http.Request) bool {
		if n.Add(1)%5 != 0 {
			return false
		}
		refused.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
		return true
	})
	s, k, _, data := commitData(t, b)
	dst := t.TempDir() + "/out"
	_, err := s.Restore(context.Background(), k, dst)
	must.NoError(t, err)
	sameFile(t, dst, data)
	must.Positive(t, refused.Load())
	t.Logf("%d requests, %d answered SlowDown", n.Load(), refused.Load())
}

// TestUnavailableServer checks that a store whose server is gone fails
// with store.ErrUnavailable, within the caller's deadline.
func TestUnavailableServer(t *testing.T) {
	srv := requireServer(t)
	var down atomic.Bool
	b := proxiedBackend(t, srv, func(w http.ResponseWriter, r *http.Request) bool {
		if !down.Load() {
			return false
		}
		hj, _ := w.(http.Hijacker)
		conn, _, _ := hj.Hijack()
		_ = conn.Close() // a reset, as a stopped server gives
		return true
	})
	s, k, src, _ := commitData(t, b)
	down.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	_, _, err := s.Commit(ctx, k, src, "n", nil)
	must.Error(t, err)
	must.True(t, errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded), must.Sprintf("got %v", err))
	must.Less(t, 10*time.Second, time.Since(start))
	down.Store(false)
	m, err := s.Latest(k)
	must.NoError(t, err)
	must.Eq(t, uint64(1), m.Generation)
}

// TestBucketGoneMidRun deletes the bucket under a running store: the next
// commit and restore fail with store.ErrUnavailable naming the cause (the
// restore destination untouched), rather than a wiped bucket passing for
// a store without checkpoints. SeaweedFS recreates a deleted bucket on the
// next PUT, so only the store's marker object can tell.
func TestBucketGoneMidRun(t *testing.T) {
	srv := requireServer(t)
	name := fmt.Sprintf("gone-%d", time.Now().UnixNano()%1e9)
	c := srv.createBucket(t, name)
	b, err := New(context.Background(), c)
	must.NoError(t, err)
	s, err := objectstore.Open(b, storetest.Options())
	must.NoError(t, err)
	k := store.Key{Namespace: "default", Job: "j", Group: "g", Task: "t"}
	src := t.TempDir()
	storetestData(t, src)
	_, _, err = s.Commit(context.Background(), k, src, "n", nil)
	must.NoError(t, err)
	must.NoError(t, s.Ping(context.Background()))

	raw, err := newBackend(c)
	must.NoError(t, err)
	var names []string
	must.NoError(t, raw.List(context.Background(), "", func(o store.ObjectInfo) error { names = append(names, o.Name); return nil }))
	for _, n := range names {
		must.NoError(t, raw.Delete(context.Background(), n))
	}
	_, err = raw.client.DeleteBucket(context.Background(), &s3.DeleteBucketInput{Bucket: aws.String(name)})
	must.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must.ErrorIs(t, s.Ping(ctx), store.ErrUnavailable) // the driver's fingerprint
	dst := t.TempDir()
	must.NoError(t, os.WriteFile(dst+"/keep", []byte("x"), 0o644))
	_, err = s.Restore(ctx, k, dst)
	must.ErrorIs(t, err, store.ErrUnavailable)
	must.StrContains(t, err.Error(), "deleted or replaced")
	got, err := os.ReadFile(dst + "/keep")
	must.NoError(t, err)
	must.Eq(t, "x", string(got))
	_, _, err = s.Commit(ctx, k, src, "n", nil)
	must.ErrorIs(t, err, store.ErrUnavailable)
}
