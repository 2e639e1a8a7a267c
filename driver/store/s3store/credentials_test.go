package s3store

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// writeKeys writes a shared credentials file with one default profile.
func writeKeys(t *testing.T, path, ak, sk string) {
	t.Helper()
	body := fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", ak, sk)
	must.NoError(t, os.WriteFile(path, []byte(body), 0o600))
}

// rotatingBackend returns a Backend on a fake S3 server that accepts only
// the access key *accepted points at, reading its keys from a credentials
// file holding key AKOLD.
func rotatingBackend(t *testing.T, code string, accepted *string) (*Backend, *fakeS3, string) {
	t.Helper()
	t.Setenv("AWS_PROFILE", "")
	fake := &fakeS3{objects: map[string][]byte{}}
	fake.refuse = func(ak string) string {
		if ak != *accepted {
			return code
		}
		return ""
	}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "credentials")
	writeKeys(t, file, "AKOLD", "secret-old")
	b, err := newBackendPolicy(Config{Endpoint: strings.TrimPrefix(srv.URL, "http://"), Bucket: "rotating",
		PathStyle: true, Region: "us-east-1", CredentialsFile: file}, testRetryPolicy)
	must.NoError(t, err)
	return b, fake, file
}

// TestRotatedCredentialsFilePickedUp rewrites the credentials file with a
// new key and revokes the old one: the next calls, a PUT and a HEAD (whose
// 403 has no body), succeed with the new key without a new Backend. When
// the rewrite keeps the file's modification time and size (a restore from
// a backup, a coarse clock), the 403 makes the store read the file afresh
// and try once more. Before, the keys were read once, at start, and every
// call failed with 403 until the plugin restarted.
func TestRotatedCredentialsFilePickedUp(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		keepStamp  bool
		first      string // the first call after the rotation: put or stat
	}{
		{"new mtime", "InvalidAccessKeyId", false, "put"},
		{"same mtime and size, unknown key", "InvalidAccessKeyId", true, "put"},
		{"same mtime and size, new secret", "SignatureDoesNotMatch", true, "put"},
		{"same mtime and size, HEAD first", "InvalidAccessKeyId", true, "stat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			accepted := "AKOLD"
			b, fake, file := rotatingBackend(t, tc.code, &accepted)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			must.NoError(t, b.Put(ctx, "before", []byte("x"), false))

			fi, err := os.Stat(file)
			must.NoError(t, err)
			accepted = "AKNEW"
			writeKeys(t, file, "AKNEW", "secret-new")
			if tc.keepStamp {
				must.NoError(t, os.Chtimes(file, fi.ModTime(), fi.ModTime()))
			} else {
				must.NoError(t, os.Chtimes(file, fi.ModTime().Add(time.Second), fi.ModTime().Add(time.Second)))
			}
			fake.mu.Lock()
			seen := len(fake.keys)
			fake.mu.Unlock()

			if tc.first == "stat" {
				_, err = b.Stat(ctx, "before")
			} else {
				err = b.Put(ctx, "after", []byte("y"), false)
			}
			must.NoError(t, err)
			must.NoError(t, b.Put(ctx, "later", []byte("z"), false))

			fake.mu.Lock()
			keys := fake.keys[seen:]
			fake.mu.Unlock()
			want := []string{"AKNEW", "AKNEW"}
			if tc.keepStamp {
				want = []string{"AKOLD", "AKNEW", "AKNEW"} // refused once, then read afresh
			}
			must.Eq(t, want, keys)
		})
	}
}

// TestRefusedCredentialsNamed: a key the server refuses and the file does
// not replace fails after one more try, with an error naming the
// credentials file, the server's code and what to do.
func TestRefusedCredentialsNamed(t *testing.T) {
	accepted := "AKOTHER"
	b, fake, file := rotatingBackend(t, "InvalidAccessKeyId", &accepted)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := b.Put(ctx, "obj", []byte("x"), false)
	must.Error(t, err)
	for _, want := range []string{"store.credentials_file " + file, "HTTP 403 InvalidAccessKeyId",
		"also after they were read afresh", "write the new key to " + file} {
		must.StrContains(t, err.Error(), want)
	}
	must.StrNotContains(t, err.Error(), "secret-old")
	must.True(t, isAuthRefused(err))
	fake.mu.Lock()
	defer fake.mu.Unlock()
	must.Eq(t, []string{"AKOLD", "AKOLD"}, fake.keys)
}

// TestCredentialsFileMidRewrite: while the file lacks its keys (a rewrite
// under way, or a deleted file) the keys read last are kept; once it holds
// keys again they are used.
func TestCredentialsFileMidRewrite(t *testing.T) {
	file := filepath.Join(t.TempDir(), "credentials")
	writeKeys(t, file, "AK1", "s1")
	f := &fileCredentials{path: file, profile: "default"}
	ctx := context.Background()
	c, err := f.Retrieve(ctx)
	must.NoError(t, err)
	must.Eq(t, "AK1", c.AccessKeyID)

	must.NoError(t, os.WriteFile(file, []byte("[default]\naws_access_"), 0o600))
	c, err = f.Retrieve(ctx)
	must.NoError(t, err)
	must.Eq(t, "AK1", c.AccessKeyID)
	must.NoError(t, os.Remove(file))
	c, err = f.Retrieve(ctx)
	must.NoError(t, err)
	must.Eq(t, "AK1", c.AccessKeyID)

	writeKeys(t, file, "AK2", "s2")
	c, err = f.Retrieve(ctx)
	must.NoError(t, err)
	must.Eq(t, "AK2", c.AccessKeyID)
	must.Eq(t, "s2", c.SecretAccessKey)
}

// TestCredentialProcessRefreshed: a profile with credential_process gets
// its credentials from the process, run again once they were refused.
func TestCredentialProcessRefreshed(t *testing.T) {
	dir := t.TempDir()
	counter := filepath.Join(dir, "n")
	script := filepath.Join(dir, "creds.sh")
	// Each run hands out the next key: AK1, AK2, ...
	must.NoError(t, os.WriteFile(script, []byte(`#!/bin/sh
n=$(($(cat `+counter+` 2>/dev/null || echo 0) + 1))
echo $n > `+counter+`
printf '{"Version":1,"AccessKeyId":"AK%d","SecretAccessKey":"s%d"}' $n $n
`), 0o700))
	file := filepath.Join(dir, "credentials")
	must.NoError(t, os.WriteFile(file, []byte("[default]\ncredential_process = "+script+"\n"), 0o600))
	t.Setenv("AWS_PROFILE", "")
	cs, err := Config{CredentialsFile: file}.credentialSource(context.Background())
	must.NoError(t, err)
	must.StrContains(t, cs.source, "credential_process")
	ctx := context.Background()
	c, err := cs.provider.Retrieve(ctx)
	must.NoError(t, err)
	must.Eq(t, "AK1", c.AccessKeyID)
	c, err = cs.provider.Retrieve(ctx)
	must.NoError(t, err)
	must.Eq(t, "AK1", c.AccessKeyID, must.Sprint("cached until refused"))
	cs.refresh()
	c, err = cs.provider.Retrieve(ctx)
	must.NoError(t, err)
	must.Eq(t, "AK2", c.AccessKeyID)
}
