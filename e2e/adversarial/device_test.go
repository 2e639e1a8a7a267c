package adversarial

import (
	"context"
	"os/exec"
	"testing"
	"time"

	log "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/nomad/helper/pluginutils/hclspecutils"
	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/shoenig/test/must"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// devicePlugin starts the cluster's caravan binary as a device plugin the
// way a Nomad client does (go-plugin, gRPC, Nomad's handshake).
func devicePlugin(t *testing.T, c *harness.C) device.DevicePlugin {
	t.Helper()
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  base.Handshake,
		Plugins:          map[string]plugin.Plugin{base.PluginTypeDevice: &device.PluginDevice{}},
		Cmd:              exec.Command(c.Bin, "device"),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           log.NewNullLogger(),
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	must.NoError(t, err)
	raw, err := rpc.Dispense(base.PluginTypeDevice)
	must.NoError(t, err)
	return raw.(device.DevicePlugin)
}

// setConfig encodes cfg through the plugin's own schema, as the agent's
// plugin loader does, and hands it to SetConfig.
func setConfig(t *testing.T, dp device.DevicePlugin, cfg map[string]any) error {
	t.Helper()
	schema, err := dp.ConfigSchema()
	must.NoError(t, err)
	spec, diags := hclspecutils.Convert(schema)
	must.False(t, diags.HasErrors())
	val, diags, errs := hclutils.ParseHclInterface(cfg, spec, nil)
	must.False(t, diags.HasErrors(), must.Sprint(diags))
	must.SliceEmpty(t, errs)
	data, err := ctymsgpack.Marshal(val, val.Type())
	must.NoError(t, err)
	return dp.SetConfig(&base.Config{PluginConfig: data})
}

// TestDevice_AbsurdShareCounts: `shares = 2^62` made the plugin panic
// (makeslice) at its first fingerprint; `shares = 2000000` took 5.8 s and
// 487 MiB and handed out 0 MiB memory limits. Expected: both, and a count
// that would make a share smaller than 1 MiB, are refused by SetConfig with
// an error naming the field, and the plugin keeps serving: a sane config
// afterwards fingerprints normally.
func TestDevice_AbsurdShareCounts(t *testing.T) {
	c := harness.Cluster(t)
	dp := devicePlugin(t, c)
	gpu := func(mib int) []map[string]any {
		return []map[string]any{{"gpu": []map[string]any{{"model": "A100", "memory_mib": mib}}}}
	}
	cases := []struct {
		name string
		cfg  map[string]any
		want string
	}{
		{"2^62", map[string]any{"backend": "simulated", "shares": 1 << 62, "simulated": gpu(40960)}, "shares: must be at most max_shares = 64"},
		{"two million", map[string]any{"backend": "simulated", "shares": 2000000, "simulated": gpu(40960)}, "shares: must be at most max_shares = 64"},
		{"below 1 MiB", map[string]any{"backend": "simulated", "shares": 64, "simulated": gpu(16)}, "shares: 64 shares of"},
		{"max_shares", map[string]any{"backend": "simulated", "max_shares": 1 << 40, "shares": 4, "simulated": gpu(40960)}, "max_shares: must be between 1 and 4096"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := setConfig(t, dp, tc.cfg)
			must.ErrorContains(t, err, tc.want)
		})
	}

	must.NoError(t, setConfig(t, dp, map[string]any{"backend": "simulated", "shares": 64, "simulated": gpu(40960)}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := dp.Fingerprint(ctx)
	must.NoError(t, err)
	select {
	case fp := <-ch:
		must.NotNil(t, fp)
		must.NoError(t, fp.Error)
		must.SliceLen(t, 1, fp.Devices)
		must.SliceLen(t, 64, fp.Devices[0].Devices)
	case <-ctx.Done():
		t.Fatal("no fingerprint")
	}
}
