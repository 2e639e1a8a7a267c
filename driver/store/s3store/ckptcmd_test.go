package s3store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/ckptcmd"
	"github.com/caravan-nomad/caravan/driver/store/objectstore"
	"github.com/caravan-nomad/caravan/driver/store/s3store"
)

// writeStoreConfig writes c as a -store-config file and a credentials file.
func writeStoreConfig(t *testing.T, c s3store.Config) string {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	must.NoError(t, os.WriteFile(creds, []byte(fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n",
		s3store.TestCredentials[0], s3store.TestCredentials[1])), 0o600))
	p := filepath.Join(dir, "store.hcl")
	must.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf(`store {
  endpoint         = %q
  bucket           = %q
  prefix           = %q
  tls              = false
  path_style       = true
  credentials_file = %q
}
`, c.Endpoint, c.Bucket, c.Prefix, creds)), 0o600))
	return p
}

func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := ckptcmd.Run(args, &out, &errb, func(string) string { return "" })
	return out.String() + errb.String(), code
}

// TestCLIAgainstS3 runs list, show, delete, gc and migrate against the real
// server, the S3 store given by -store-config.
func TestCLIAgainstS3(t *testing.T) {
	c := s3store.NewTestStoreConfig(t)
	cfgFile := writeStoreConfig(t, c)
	t.Setenv("AWS_PROFILE", "")

	// A directory store with two keys, migrated to S3.
	dirStore := t.TempDir()
	ds, err := store.Open(dirStore, store.Options{ChunkSize: 4096})
	must.NoError(t, err)
	keys := []store.Key{
		{Namespace: "default", Job: "train", Group: "g", Task: "a", Incarnation: "1"},
		{Namespace: "default", Job: "train", Group: "g", Task: "b", Incarnation: "1"},
	}
	data := make([]byte, 64<<10)
	_, _ = rand.Read(data)
	for i, k := range keys {
		src := t.TempDir()
		must.NoError(t, os.WriteFile(filepath.Join(src, "w.bin"), data, 0o644))
		_, _, err := ds.Commit(context.Background(), k, src, "node1", map[string]string{"step": fmt.Sprint(100 + i), "sequence": "3"})
		must.NoError(t, err)
	}
	out, code := run(t, "migrate", "-store", dirStore, "-to-store-config", cfgFile)
	must.Eq(t, 0, code, must.Sprint(out))
	must.StrContains(t, out, "migrated 2 keys")

	out, code = run(t, "list", "-store-config", cfgFile)
	must.Eq(t, 0, code, must.Sprint(out))
	for _, k := range keys {
		must.StrContains(t, out, k.String())
	}
	out, code = run(t, "show", "-store-config", cfgFile, keys[1].String())
	must.Eq(t, 0, code, must.Sprint(out))
	must.StrContains(t, out, "101")

	// The migrated checkpoint restores from S3, bit for bit.
	b, err := s3store.New(context.Background(), c2(c))
	must.NoError(t, err)
	s3s, err := objectstore.Open(b, store.Options{})
	must.NoError(t, err)
	dst := filepath.Join(t.TempDir(), "out")
	res, err := s3s.Restore(context.Background(), keys[0], dst)
	must.NoError(t, err)
	must.Eq(t, "100", res.Manifest.Meta["step"])
	got, err := os.ReadFile(filepath.Join(dst, "w.bin"))
	must.NoError(t, err)
	must.True(t, bytes.Equal(data, got))

	out, code = run(t, "delete", "-store-config", cfgFile, keys[0].String())
	must.Eq(t, 0, code, must.Sprint(out))
	out, code = run(t, "gc", "-store-config", cfgFile)
	must.Eq(t, 0, code, must.Sprint(out))
	out, code = run(t, "list", "-store-config", cfgFile)
	must.Eq(t, 0, code, must.Sprint(out))
	must.False(t, strings.Contains(out, keys[0].String()))
	must.StrContains(t, out, keys[1].String())

	out, code = run(t, "list", "-store", dirStore, "-store-config", cfgFile)
	must.Eq(t, 2, code, must.Sprint(out))
}

// c2 is c with the test credentials.
func c2(c s3store.Config) s3store.Config {
	c.AccessKeyID, c.SecretAccessKey = s3store.TestCredentials[0], s3store.TestCredentials[1]
	return c
}
