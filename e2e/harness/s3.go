package harness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// S3 is the cluster's S3 checkpoint store: the SeaweedFS server that
// scripts/cluster.sh starts on loopback when CARAVAN_STORE=s3
// (scripts/cluster/s3.sh), and the bucket and prefix the clients' driver
// plugins use through their `store` block. The clients then share no
// checkpoint directory.
type S3 struct {
	// Endpoint is the S3 API's URL (http://127.0.0.1:<base+16>).
	Endpoint string
	// Bucket and Prefix are the clients' (prefix without a trailing /).
	Bucket, Prefix, Region string
	// CredentialsFile holds the clients' keys (limited to the bucket),
	// AdminCredentialsFile the admin's, OtherTeamCredentialsFile those of
	// an identity limited to the prefix other-team/ (AWS shared-credentials
	// format, mode 0600).
	CredentialsFile, AdminCredentialsFile, OtherTeamCredentialsFile string
}

// S3 returns the cluster's S3 store. It fails the test when the cluster
// was not started with CARAVAN_STORE=s3: the S3 tests never skip.
func (c *C) S3(t testing.TB) S3 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, "store"))
	if kind := strings.TrimSpace(string(b)); err != nil || kind != "s3" {
		t.Fatalf("harness: the cluster in %s runs a %q checkpoint store (%v), not s3: start it with CARAVAN_STORE=s3 "+
			"(make e2e-s3 does), after `make seaweedfs`", c.Dir, kind, err)
	}
	base := DefaultPortBase
	if v := os.Getenv("CARAVAN_PORT_BASE"); v != "" {
		base, _ = strconv.Atoi(v)
	}
	dir := filepath.Join(c.Dir, "s3")
	return S3{
		Endpoint:                 fmt.Sprintf("http://127.0.0.1:%d", base+16),
		Bucket:                   "caravan",
		Prefix:                   fmt.Sprintf("cluster-%d", base),
		Region:                   "us-east-1",
		CredentialsFile:          filepath.Join(dir, "credentials"),
		AdminCredentialsFile:     filepath.Join(dir, "admin.credentials"),
		OtherTeamCredentialsFile: filepath.Join(dir, "other-team.credentials"),
	}
}

// StopS3 stops the cluster's S3 server alone (bounded: SIGTERM, then
// SIGKILL after 5s); StartS3 starts it again on the same data and keys and
// waits until the bucket answers.
func (c *C) StopS3(t testing.TB) {
	t.Helper()
	if err := c.script("s3-stop"); err != nil {
		t.Fatalf("harness: %v", err)
	}
}

// StartS3 starts the cluster's S3 server after StopS3.
func (c *C) StartS3(t testing.TB) {
	t.Helper()
	if err := c.script("s3-start"); err != nil {
		t.Fatalf("harness: %v", err)
	}
}

// Credentials reads the access key and secret of an AWS shared-credentials
// file's default profile.
func Credentials(t testing.TB, file string) (accessKey, secretKey string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "aws_access_key_id":
			accessKey = strings.TrimSpace(v)
		case "aws_secret_access_key":
			secretKey = strings.TrimSpace(v)
		}
	}
	if accessKey == "" || secretKey == "" {
		t.Fatalf("harness: %s holds no aws_access_key_id and aws_secret_access_key", file)
	}
	return accessKey, secretKey
}

// Request sends one S3 request signed (SigV4, by curl) with the given keys
// (empty: anonymous) and returns the HTTP status and body. path starts with
// the bucket; query values must be URI-encoded already (%2F for /).
func (s S3) Request(t testing.TB, accessKey, secretKey, method, path string, body []byte) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := []string{"-s", "-S", "--max-time", "20", "-X", method, "-w", "\n%{http_code}"}
	if accessKey != "" {
		args = append(args, "--aws-sigv4", "aws:amz:"+s.Region+":s3", "--user", accessKey+":"+secretKey)
	}
	sum := sha256.Sum256(body)
	// curl signs the payload's hash only when the header is there.
	args = append(args, "-H", "x-amz-content-sha256: "+hex.EncodeToString(sum[:]))
	if body != nil {
		args = append(args, "--data-binary", "@-", "-H", "Content-Type: application/octet-stream")
	}
	cmd := exec.CommandContext(ctx, "curl", append(args, s.Endpoint+"/"+strings.TrimPrefix(path, "/"))...)
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("harness: curl %s %s: %v", method, path, err)
	}
	text := strings.TrimRight(string(out), "\n")
	i := strings.LastIndexByte(text, '\n')
	code, err := strconv.Atoi(text[i+1:])
	if err != nil {
		t.Fatalf("harness: curl %s %s: no status in %q", method, path, text)
	}
	return code, text[:max(i, 0)]
}
