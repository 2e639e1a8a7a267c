package s3store

import (
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/objectstore"
)

// chunkRequest is one request on a chunk object a proxy saw.
type chunkRequest struct {
	method string
	status int
	sent   int64 // body bytes the client sent
	create bool  // If-None-Match: *
	expect bool  // Expect: 100-continue
}

// countingBody counts the bytes read from a request body.
type countingBody struct {
	io.ReadCloser
	n atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// statusWriter records the status a handler writes.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// TestS3_ChunkRequests commits a checkpoint of ten 2 MiB chunks (one
// worker, so in order) through a proxy that records every request on a
// chunk object. A fresh key's first 8 chunks are looked up (HEAD, 404) and
// uploaded; the last 2 are created conditionally with no lookup. No chunk
// PUT waits for 100-continue, and each sends its chunk once. The same
// bytes under a second key are looked up, found, and not sent again.
func TestS3_ChunkRequests(t *testing.T) {
	srv := requireServer(t)
	target, err := url.Parse("http://" + srv.endpoint)
	must.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	var seen []chunkRequest
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/chunks/") {
			rp.ServeHTTP(w, r)
			return
		}
		body := &countingBody{ReadCloser: r.Body}
		r.Body = body
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		rp.ServeHTTP(sw, r)
		mu.Lock()
		seen = append(seen, chunkRequest{method: r.Method, status: sw.status, sent: body.n.Load(),
			create: r.Header.Get("If-None-Match") == "*", expect: r.Header.Get("Expect") != ""})
		mu.Unlock()
	}))
	defer proxy.Close()
	c := srv.newBucket(t)
	c.Endpoint = proxy.Listener.Addr().String()
	b, err := New(context.Background(), c)
	must.NoError(t, err)
	const chunkSize = 2 << 20 // the SDK asks bodies this large to wait for 100-continue
	s, err := objectstore.Open(b, store.Options{Retain: 2, ChunkSize: chunkSize, Workers: 1})
	must.NoError(t, err)
	src := t.TempDir()
	data := make([]byte, 10*chunkSize)
	_, err = rand.Read(data)
	must.NoError(t, err)
	must.NoError(t, os.WriteFile(filepath.Join(src, "state.bin"), data, 0o644))
	ctx := context.Background()
	take := func() []chunkRequest {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}

	_, st, err := s.Commit(ctx, store.Key{Namespace: "default", Job: "j", Group: "g", Task: "one"}, src, "n", nil)
	must.NoError(t, err)
	must.Eq(t, int64(len(data)), st.NewBytes)
	var want []chunkRequest
	for range 8 {
		want = append(want, chunkRequest{method: http.MethodHead, status: http.StatusNotFound},
			chunkRequest{method: http.MethodPut, status: http.StatusOK, sent: chunkSize})
	}
	for range 2 {
		want = append(want, chunkRequest{method: http.MethodPut, status: http.StatusOK, sent: chunkSize, create: true})
	}
	must.Eq(t, want, take())

	k2 := store.Key{Namespace: "default", Job: "j", Group: "g", Task: "two"}
	_, st, err = s.Commit(ctx, k2, src, "n", nil)
	must.NoError(t, err)
	must.Eq(t, int64(0), st.NewBytes)
	want = nil
	for range 10 {
		want = append(want, chunkRequest{method: http.MethodHead, status: http.StatusOK})
	}
	must.Eq(t, want, take())
	dst := filepath.Join(t.TempDir(), "out")
	_, err = s.Restore(ctx, k2, dst)
	must.NoError(t, err)
	sameFile(t, dst, data)
}
