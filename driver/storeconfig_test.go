package driver

import (
	"context"
	"net"
	"testing"

	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
	"github.com/hashicorp/nomad/helper/testlog"
	"github.com/hashicorp/nomad/plugins/base"
	dtestutil "github.com/hashicorp/nomad/plugins/drivers/testutils"
	"github.com/shoenig/test/must"
)

// TestConfigSchema_StoreBlock decodes a plugin config with a store block
// the way Nomad does (hclspec, msgpack) and checks its defaults.
func TestConfigSchema_StoreBlock(t *testing.T) {
	var got Config
	hclutils.NewConfigParser(configSpec).ParseHCL(t, `config {
  enabled = true
  store {
    endpoint = "s3.example.com:8333"
    bucket   = "checkpoints"
    prefix   = "team-a/cluster-1"
  }
}`, &got)
	must.NotNil(t, got.Store)
	must.Eq(t, StoreConfig{Endpoint: "s3.example.com:8333", Bucket: "checkpoints", Prefix: "team-a/cluster-1", TLS: true}, *got.Store)
	must.Eq(t, "", got.CheckpointStore)
}

func TestDriver_SetConfigStoreBlockNamesField(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	dead := closed.Addr().String()
	must.NoError(t, closed.Close())
	t.Setenv("AWS_ACCESS_KEY_ID", "ak")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-value")
	good := StoreConfig{Endpoint: "s3.example.com:8333", Bucket: "checkpoints"}
	base3 := func(sc StoreConfig, dir string) Config {
		return Config{Enabled: true, CheckpointStore: dir, Store: &sc, CheckpointRetain: 3, CheckpointGCInterval: "0s"}
	}
	edit := func(f func(*StoreConfig)) StoreConfig {
		sc := good
		f(&sc)
		return sc
	}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"both", base3(good, "/mnt/checkpoints"), "not both"},
		{"bucket", base3(edit(func(s *StoreConfig) { s.Bucket = "Bad_Bucket" }), ""), "store.bucket"},
		{"endpoint scheme", base3(edit(func(s *StoreConfig) { s.Endpoint = "https://x" }), ""), "store.endpoint"},
		{"relative credentials", base3(edit(func(s *StoreConfig) { s.CredentialsFile = "creds" }), ""), "store.credentials_file"},
		{"relative ca", base3(edit(func(s *StoreConfig) { s.CACert = "ca.pem" }), ""), "store.ca_cert"},
		{"unreachable at start", base3(edit(func(s *StoreConfig) { s.Endpoint, s.TLS = dead, false }), ""), "store.endpoint"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDriver(context.Background(), testlog.HCLogger(t))
			h := dtestutil.NewDriverHarness(t, d)
			var data []byte
			must.NoError(t, base.MsgPackEncode(&data, &tc.cfg))
			err := h.SetConfig(&base.Config{PluginConfig: data})
			must.ErrorContains(t, err, tc.want)
			must.StrNotContains(t, err.Error(), "s3cr3t-value")
		})
	}
}
