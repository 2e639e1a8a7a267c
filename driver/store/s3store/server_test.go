package s3store

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"
)

// Tests against a real SeaweedFS server run only when CARAVAN_S3_TESTS=1
// (make test sets it); then a missing server binary fails them. The binary
// is build/bin/seaweedfs at the repository root, or $CARAVAN_WEED.
const (
	envS3Tests = "CARAVAN_S3_TESTS"
	envWeed    = "CARAVAN_WEED"
	testAK     = "caravan-test-ak"
	testSK     = "caravan-test-secret"
)

// server is one SeaweedFS server (master, volume, filer and S3 gateway in
// one process) on loopback, with an identities config so that only testAK
// and testSK are accepted.
type server struct {
	endpoint string
	cmd      *exec.Cmd
	dir      string
}

var (
	sharedOnce sync.Once
	shared     *server
	sharedErr  error
)

// requireServer returns the package's server, starting it on first use; it
// skips unless CARAVAN_S3_TESTS=1 and fails when the binary is missing.
func requireServer(t *testing.T) *server {
	t.Helper()
	if os.Getenv(envS3Tests) != "1" {
		t.Skipf("set %s=1 to run the tests against a real SeaweedFS server", envS3Tests)
	}
	sharedOnce.Do(func() { shared, sharedErr = startServer() })
	if sharedErr != nil {
		t.Fatalf("SeaweedFS server: %v", sharedErr)
	}
	return shared
}

func weedBinary() (string, error) {
	if p := os.Getenv(envWeed); p != "" {
		return p, nil
	}
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "build", "bin", "seaweedfs")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no SeaweedFS binary at %s (build it with `make seaweedfs`, or set %s): %w", p, envWeed, err)
	}
	return p, nil
}

// freePorts returns n distinct free loopback ports whose port+10000 (the
// gRPC ports SeaweedFS adds) are free too.
func freePorts(n int) ([]int, error) {
	var out []int
	var hold []net.Listener
	defer func() {
		for _, l := range hold {
			_ = l.Close()
		}
	}()
	for tries := 0; len(out) < n && tries < 200; tries++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if port+10000 > 65535 {
			_ = l.Close()
			continue
		}
		l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+10000))
		if err != nil {
			_ = l.Close()
			continue
		}
		hold = append(hold, l, l2)
		out = append(out, port)
	}
	if len(out) < n {
		return nil, fmt.Errorf("found %d free ports, want %d", len(out), n)
	}
	return out, nil
}

func startServer() (*server, error) {
	bin, err := weedBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "caravan-s3store-weed-*")
	if err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`{"identities":[{"name":"caravan","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","Write","List","Tagging"]}]}`, testAK, testSK)
	if err := os.WriteFile(filepath.Join(dir, "s3.json"), []byte(conf), 0o600); err != nil {
		return nil, err
	}
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	must0 := os.MkdirAll(filepath.Join(dir, "data"), 0o755)
	if must0 != nil {
		return nil, must0
	}
	log, err := os.Create(filepath.Join(dir, "weed.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "server", "-dir="+filepath.Join(dir, "data"), "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		fmt.Sprintf("-master.port=%d", ports[0]), fmt.Sprintf("-volume.port=%d", ports[1]),
		fmt.Sprintf("-filer.port=%d", ports[2]), "-s3", fmt.Sprintf("-s3.port=%d", ports[3]),
		"-s3.config="+filepath.Join(dir, "s3.json"), "-master.volumeSizeLimitMB=1024", "-volume.max=50",
		"-s3.port.iceberg=0", "-s3.port.lance=0")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	srv := &server{endpoint: fmt.Sprintf("127.0.0.1:%d", ports[3]), cmd: cmd, dir: dir}
	// Ready once a bucket is created and an object written (the S3 port
	// answers before the filer's lock service is up, and writes fail with
	// 500 until it is).
	b, err := newBackend(srv.config(readyBucket))
	if err != nil {
		srv.stop()
		return nil, err
	}
	err = wait.InitialSuccess(wait.ErrorFunc(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := b.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(readyBucket)})
		if err != nil && errorCode(err) != "BucketAlreadyOwnedByYou" && errorCode(err) != "BucketAlreadyExists" {
			return err
		}
		return b.Put(ctx, "ready", []byte("ok"), false)
	}), wait.Timeout(120*time.Second), wait.Gap(500*time.Millisecond)).Run()
	if err != nil {
		srv.stop()
		return nil, fmt.Errorf("SeaweedFS S3 on %s did not answer (log %s): %w", srv.endpoint, log.Name(), err)
	}
	return srv, nil
}

func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	if os.Getenv("CARAVAN_S3_KEEP") == "" {
		_ = os.RemoveAll(s.dir)
	}
}

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
// own (as clusters sharing a bucket are kept apart; a bucket per test would
// make SeaweedFS allocate volumes for each).
const readyBucket = "caravan-tests"

// newBucket returns a config for a fresh, empty prefix of the shared bucket.
func (s *server) newBucket(t *testing.T) Config {
	t.Helper()
	c := s.config(readyBucket)
	c.Prefix = strings.ToLower(fmt.Sprintf("t-%d-%s/cluster-a", time.Now().UnixNano()%1e9, randHex(4)))
	return c
}

// createBucket creates bucket name on the server.
func (s *server) createBucket(t *testing.T, name string) Config {
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

func randHex(n int) string {
	b := make([]byte, n)
	f, _ := os.Open("/dev/urandom")
	defer f.Close()
	_, _ = f.Read(b)
	return fmt.Sprintf("%x", b)
}
