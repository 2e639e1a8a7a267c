// Package s3test starts a real SeaweedFS S3 server on loopback for tests and
// benchmarks: those of s3store itself, and those of other packages (the
// driver's migration benchmark) that need an S3 checkpoint store. It does not
// import s3store, so s3store's own tests can use it.
//
// Tests against the server run only when CARAVAN_S3_TESTS=1 (make test sets
// it); then a missing server binary fails them. The binary is
// build/bin/seaweedfs at the repository root, or $CARAVAN_WEED.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/shoenig/test/wait"
)

const (
	// EnvTests turns the tests against the real server on ("1").
	EnvTests = "CARAVAN_S3_TESTS"
	// EnvWeed names the SeaweedFS binary (default build/bin/seaweedfs).
	EnvWeed = "CARAVAN_WEED"
	// AccessKey and SecretKey are the only credentials the server accepts.
	AccessKey = "caravan-test-ak"
	SecretKey = "caravan-test-secret"
	// Bucket exists once Start returns; tests share it, each below a
	// prefix of its own (as clusters sharing a bucket are kept apart; a
	// bucket per test would make SeaweedFS allocate volumes for each).
	Bucket = "caravan-tests"
	// Region is the region the server's clients sign for.
	Region = "us-east-1"
)

// Server is one SeaweedFS server (master, volume, filer and S3 gateway in
// one process) on loopback, with an identities config so that only
// AccessKey and SecretKey are accepted.
type Server struct {
	// Endpoint is the S3 API's host:port (plain HTTP, path-style).
	Endpoint string
	// Dir holds the server's data, identities and log (weed.log).
	Dir string
	cmd *exec.Cmd
}

// Enabled reports whether CARAVAN_S3_TESTS=1.
func Enabled() bool { return os.Getenv(EnvTests) == "1" }

// Skip skips t unless CARAVAN_S3_TESTS=1.
func Skip(t testing.TB) {
	t.Helper()
	if !Enabled() {
		t.Skipf("set %s=1 to run the tests against a real SeaweedFS server", EnvTests)
	}
}

// Start skips t unless CARAVAN_S3_TESTS=1, starts a server of t's own and
// stops it when t ends; a missing binary fails t.
func Start(t testing.TB) *Server {
	t.Helper()
	Skip(t)
	s, err := StartServer()
	if err != nil {
		t.Fatalf("SeaweedFS server: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// NewPrefix returns a fresh prefix of Bucket, below which nothing exists.
func NewPrefix() string {
	return strings.ToLower(fmt.Sprintf("t-%d-%s/cluster-a", time.Now().UnixNano()%1e9, randHex(4)))
}

// CredentialsFile writes the server's credentials in the AWS
// shared-credentials format (mode 0600) into dir and returns its path.
func CredentialsFile(dir string) (string, error) {
	p := filepath.Join(dir, "s3.credentials")
	body := fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", AccessKey, SecretKey)
	return p, os.WriteFile(p, []byte(body), 0o600)
}

func weedBinary() (string, error) {
	if p := os.Getenv(EnvWeed); p != "" {
		return p, nil
	}
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "build", "bin", "seaweedfs")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no SeaweedFS binary at %s (build it with `make seaweedfs`, or set %s): %w", p, EnvWeed, err)
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

// StartServer starts a server and waits until Bucket takes a write; the
// caller stops it.
func StartServer() (*Server, error) {
	bin, err := weedBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "caravan-s3store-weed-*")
	if err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`{"identities":[{"name":"caravan","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","Write","List","Tagging"]}]}`, AccessKey, SecretKey)
	if err := os.WriteFile(filepath.Join(dir, "s3.json"), []byte(conf), 0o600); err != nil {
		return nil, err
	}
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "weed.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "server", "-dir="+filepath.Join(dir, "data"), "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		fmt.Sprintf("-master.port=%d", ports[0]), fmt.Sprintf("-volume.port=%d", ports[1]),
		fmt.Sprintf("-filer.port=%d", ports[2]), "-s3", fmt.Sprintf("-s3.port=%d", ports[3]),
		"-s3.config="+filepath.Join(dir, "s3.json"), "-master.volumeSizeLimitMB=1024", "-volume.max=50",
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.autoCreateBucket=false", "-master.telemetry=false")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &Server{Endpoint: fmt.Sprintf("127.0.0.1:%d", ports[3]), Dir: dir, cmd: cmd}
	// Ready once the bucket is created and an object written (the S3 port
	// answers before the filer's lock service is up, and writes fail with
	// 500 until it is).
	if err := s.waitReady(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("SeaweedFS S3 on %s did not answer (log %s): %w", s.Endpoint, log.Name(), err)
	}
	return s, nil
}

func (s *Server) waitReady() error {
	client := s3.New(s3.Options{
		BaseEndpoint: aws.String("http://" + s.Endpoint), UsePathStyle: true, Region: Region,
		Credentials:                credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	return wait.InitialSuccess(wait.ErrorFunc(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(Bucket)})
		var owned *types.BucketAlreadyOwnedByYou
		var exists *types.BucketAlreadyExists
		if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
			return err
		}
		_, err = client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(Bucket), Key: aws.String("ready"),
			Body: strings.NewReader("ok"), ContentLength: aws.Int64(2)})
		return err
	}), wait.Timeout(120*time.Second), wait.Gap(500*time.Millisecond)).Run()
}

// Pid is the server process's id (benchmarks read its CPU time).
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Stop kills the server and removes its directory (kept when
// CARAVAN_S3_KEEP is set).
func (s *Server) Stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	if os.Getenv("CARAVAN_S3_KEEP") == "" {
		_ = os.RemoveAll(s.Dir)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	f, _ := os.Open("/dev/urandom")
	defer f.Close()
	_, _ = f.Read(b)
	return fmt.Sprintf("%x", b)
}
