package driver

import (
	"context"
	"fmt"
	"os/user"
	"testing"

	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
	"github.com/hashicorp/nomad/helper/testlog"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	dtestutil "github.com/hashicorp/nomad/plugins/drivers/testutils"
	"github.com/shoenig/test/must"
)

// TestConfigSchema_EnabledDefaultsOff: like raw_exec, a plugin block that
// does not say enabled = true leaves the driver off.
func TestConfigSchema_EnabledDefaultsOff(t *testing.T) {
	cases := []struct {
		hcl  string
		want bool
	}{
		{`config {}`, false},
		{`config { enabled = false }`, false},
		{`config { enabled = true }`, true},
	}
	for _, tc := range cases {
		t.Run(tc.hcl, func(t *testing.T) {
			var c Config
			hclutils.NewConfigParser(configSpec).ParseHCL(t, tc.hcl, &c)
			must.Eq(t, tc.want, c.Enabled)
		})
	}
}

// TestDriver_DisabledIsUndetectedAndRefusesTasks: a disabled driver is
// fingerprinted as undetected (Nomad places no task on it) and refuses a
// task that reaches it anyway, saying how to turn it on.
func TestDriver_DisabledIsUndetectedAndRefusesTasks(t *testing.T) {
	td := newTestDriverRaw(t, &Config{})
	ch, err := td.Fingerprint(context.Background())
	must.NoError(t, err)
	fp := <-ch
	must.Eq(t, drivers.HealthStateUndetected, fp.Health)
	must.MapNotContainsKey(t, fp.Attributes, "driver.caravan")

	cfg := newTask(t, td, "client1", &TaskConfig{Command: "/bin/true"})
	_, _, err = td.d.StartTask(cfg)
	must.ErrorIs(t, err, errDisabled)
	_, _, err = td.StartTask(cfg) // through gRPC
	must.ErrorContains(t, err, "set enabled = true")
}

func TestDriver_SetConfigRejectsBadIDRanges(t *testing.T) {
	cases := []struct {
		uids, gids, want string
	}{
		{"root", "", "denied_host_uids"},
		{"10-5", "", "denied_host_uids"},
		{"0,", "", "denied_host_uids"},
		{"", "1-", "denied_host_gids"},
		{"", "4294967296", "denied_host_gids"},
	}
	for _, tc := range cases {
		t.Run(tc.want+"="+tc.uids+tc.gids, func(t *testing.T) {
			d := NewDriver(context.Background(), testlog.HCLogger(t))
			h := dtestutil.NewDriverHarness(t, d)
			var data []byte
			must.NoError(t, base.MsgPackEncode(&data, &Config{Enabled: true, CheckpointRetain: 1, CheckpointGCInterval: "1m",
				DeniedHostUids: tc.uids, DeniedHostGids: tc.gids}))
			must.ErrorContains(t, h.SetConfig(&base.Config{PluginConfig: data}), tc.want)
		})
	}
}

func TestParseIDRanges(t *testing.T) {
	r, err := parseIDRanges("denied_host_uids", "0, 10-20,65534")
	must.NoError(t, err)
	for id, want := range map[uint32]bool{0: true, 1: false, 9: false, 10: true, 15: true, 20: true, 21: false, 65534: true} {
		must.Eq(t, want, r.contains(id), must.Sprintf("id %d", id))
	}
	r, err = parseIDRanges("denied_host_uids", "")
	must.NoError(t, err)
	must.False(t, r.contains(0))
}

// TestDriver_DeniedHostIDs runs the checks raw_exec runs at task start:
// the task's user (else the agent's) must have no denied UID and be in no
// denied group.
func TestDriver_DeniedHostIDs(t *testing.T) {
	me, err := user.Current()
	must.NoError(t, err)
	nobody, err := user.Lookup("nobody")
	must.NoError(t, err)
	cases := []struct {
		name       string
		uids, gids string
		taskUser   string
		refused    string // "" runs the task
	}{
		{"agent's uid denied", me.Uid, "", "", "denied_host_uids"},
		{"agent's uid in a denied range", me.Uid + "-" + me.Uid, "", "", "denied_host_uids"},
		{"agent's primary group denied", "", me.Gid, "", "denied_host_gids"},
		{"task user's uid denied", "", "", "nobody", ""}, // filled below
		{"other ids denied", "4000000-4000010", "4000000", "", ""},
	}
	cases[3].uids, cases[3].refused = nobody.Uid, fmt.Sprintf("user %q has UID %s", "nobody", nobody.Uid)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			td := newTestDriverWith(t, &Config{DeniedHostUids: tc.uids, DeniedHostGids: tc.gids})
			cfg := newTask(t, td, "client1", &TaskConfig{Command: "/bin/sh", Args: []string{"-c", "exit 0"}})
			cfg.User = tc.taskUser
			_, _, err := td.d.StartTask(cfg)
			if tc.refused == "" {
				must.NoError(t, err)
				must.Eq(t, 0, td.waitExit(t, cfg.ID).ExitCode)
				return
			}
			must.ErrorIs(t, err, errDeniedHostID)
			must.ErrorContains(t, err, tc.refused)
			_, err = td.d.InspectTask(cfg.ID)
			must.ErrorIs(t, err, drivers.ErrTaskNotFound)
		})
	}
}
