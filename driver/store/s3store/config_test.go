package s3store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

func TestConfigValidateNamesField(t *testing.T) {
	good := Config{Endpoint: "s3.example.com:8333", Bucket: "ckpt", AccessKeyID: "a", SecretAccessKey: "b"}
	must.NoError(t, good.Validate())
	cases := map[string]struct {
		edit  func(*Config)
		field string
	}{
		"no endpoint":     {func(c *Config) { c.Endpoint = "" }, "store.endpoint"},
		"scheme":          {func(c *Config) { c.Endpoint = "https://s3.example.com" }, "store.endpoint"},
		"path":            {func(c *Config) { c.Endpoint = "s3.example.com/x" }, "store.endpoint"},
		"empty port":      {func(c *Config) { c.Endpoint = "s3.example.com:" }, "store.endpoint"},
		"no bucket":       {func(c *Config) { c.Bucket = "" }, "store.bucket"},
		"upper bucket":    {func(c *Config) { c.Bucket = "Ckpt" }, "store.bucket"},
		"absolute prefix": {func(c *Config) { c.Prefix = "/a" }, "store.prefix"},
		"dotdot prefix":   {func(c *Config) { c.Prefix = "a/../b" }, "store.prefix"},
		"ca without tls":  {func(c *Config) { c.CACertFile = "/etc/hosts" }, "store.ca_cert"},
		"missing ca":      {func(c *Config) { c.TLS, c.CACertFile = true, "/nonexistent/ca.pem" }, "store.ca_cert"},
		"missing creds":   {func(c *Config) { c.CredentialsFile = "/nonexistent/creds" }, "store.credentials_file"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			err := c.Validate()
			must.ErrorIs(t, err, ErrConfig)
			must.StrContains(t, err.Error(), tc.field)
		})
	}
}

func TestConfigNeverPrintsCredentials(t *testing.T) {
	c := Config{Endpoint: "h:1", Bucket: "bkt", AccessKeyID: "AKIDSECRETID", SecretAccessKey: "verysecretkey", SessionToken: "tokentoken"}
	for _, s := range []string{c.String(), fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprint(&c)} {
		for _, secret := range []string{"AKIDSECRETID", "verysecretkey", "tokentoken"} {
			must.StrNotContains(t, s, secret)
		}
	}
	b, err := newBackend(c)
	must.NoError(t, err)
	must.StrNotContains(t, b.String(), "verysecretkey")
}

func TestCredentialsSources(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "credentials")
	must.NoError(t, os.WriteFile(file, []byte(`# comment
[default]
aws_access_key_id = fileak
aws_secret_access_key = filesk

[profile team-b]
aws_access_key_id=bak
aws_secret_access_key=bsk
aws_session_token=btok
`), 0o600))
	t.Setenv("AWS_ACCESS_KEY_ID", "envak")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "envsk")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")

	keys := func(c Config) (string, string, string, string, error) {
		cs, err := c.credentialSource(context.Background())
		if err != nil {
			return "", "", "", "", err
		}
		v, err := cs.provider.Retrieve(context.Background())
		return v.AccessKeyID, v.SecretAccessKey, v.SessionToken, cs.source, err
	}
	ak, sk, _, _, err := keys(Config{})
	must.NoError(t, err)
	must.Eq(t, "envak", ak)
	must.Eq(t, "envsk", sk)

	ak, sk, _, src, err := keys(Config{CredentialsFile: file})
	must.NoError(t, err)
	must.Eq(t, "fileak", ak)
	must.Eq(t, "filesk", sk)
	must.Eq(t, "store.credentials_file "+file+" (profile default)", src)

	t.Setenv("AWS_PROFILE", "team-b")
	ak, _, tok, _, err := keys(Config{CredentialsFile: file})
	must.NoError(t, err)
	must.Eq(t, "bak", ak)
	must.Eq(t, "btok", tok)

	t.Setenv("AWS_PROFILE", "nope")
	_, _, _, _, err = keys(Config{CredentialsFile: file})
	must.ErrorIs(t, err, ErrConfig)
	must.StrContains(t, err.Error(), "store.credentials_file")
	must.StrContains(t, err.Error(), "[nope]")

	// Nothing anywhere: no environment keys, no shared files, no web
	// identity or container credentials (instance metadata is never asked).
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "")
	_, _, _, _, err = keys(Config{})
	must.Error(t, err)
}
