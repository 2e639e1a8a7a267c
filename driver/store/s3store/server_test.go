package s3store

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store/s3store/s3test"
)

// Tests against a real SeaweedFS server run only when CARAVAN_S3_TESTS=1
// (make test sets it); then a missing server binary fails them (s3test).
const (
	testAK = s3test.AccessKey
	testSK = s3test.SecretKey
)

// server is the package's one SeaweedFS server (s3test.Server).
type server struct {
	endpoint string
	srv      *s3test.Server
}

var (
	sharedOnce sync.Once
	shared     *server
	sharedErr  error
)

// requireServer returns the package's server, starting it on first use; it
// skips unless CARAVAN_S3_TESTS=1 and fails when the binary is missing.
func requireServer(t testing.TB) *server {
	t.Helper()
	s3test.Skip(t)
	sharedOnce.Do(func() {
		var s *s3test.Server
		if s, sharedErr = s3test.StartServer(); sharedErr == nil {
			shared = &server{endpoint: s.Endpoint, srv: s}
		}
	})
	if sharedErr != nil {
		t.Fatalf("SeaweedFS server: %v", sharedErr)
	}
	return shared
}

func (s *server) stop() { s.srv.Stop() }

// TestMain stops the shared server after the package's tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	os.Exit(code)
}

// config returns a config for bucket on the server with the test
// credentials.
func (s *server) config(bucket string) Config {
	return Config{Endpoint: s.endpoint, Bucket: bucket, PathStyle: true, Region: "us-east-1",
		AccessKeyID: testAK, SecretAccessKey: testSK}
}

// readyBucket is the bucket the tests share, each below a prefix of its
// own.
const readyBucket = s3test.Bucket

// newBucket returns a config for a fresh, empty prefix of the shared bucket.
func (s *server) newBucket(t testing.TB) Config {
	t.Helper()
	c := s.config(readyBucket)
	c.Prefix = s3test.NewPrefix()
	return c
}

// createBucket creates bucket name on the server.
func (s *server) createBucket(t testing.TB, name string) Config {
	t.Helper()
	c := s.config(name)
	b, err := newBackend(c)
	must.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = b.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	must.NoError(t, err)
	return c
}
