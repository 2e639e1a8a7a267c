package config

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/internal/cli"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "planner.hcl")
	must.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestLoad_FileThenFlags(t *testing.T) {
	p := writeFile(t, `
log_level = "debug"
port      = 9000
dry_run   = true
nomad {
  address       = "http://127.0.0.1:4646"
  namespace     = "ml"
  blocking_wait = "30s"
}
consul {
  address     = "127.0.0.1:8500"
  lock_key    = "x/leader"
  session_ttl = "15s"
}
policy {
  name                  = "goodput"
  interval              = "10s"
  cooldown              = "1m"
  restart_cost          = "45s"
  max_changes_per_round = 2
  suspend_quantum       = "3m"
}
capacity {
  device         = "caravan/gpu"
  shares_per_gpu = 4
}
progress {
  audience            = "aud"
  refuse_without_acls = true
}
`)
	f, err := ParseFlags([]string{"-config", p, "-port", "9100", "-nomad-address", "http://10.0.0.1:4646"}, io.Discard)
	must.NoError(t, err)
	c, err := Load(f)
	must.NoError(t, err)
	must.Eq(t, "debug", c.LogLevel)
	must.Eq(t, 9100, c.Port) // flag wins
	must.True(t, c.DryRun)
	must.Eq(t, "http://10.0.0.1:4646", c.Nomad.Address)
	must.Eq(t, "ml", c.Nomad.Namespace)
	must.Eq(t, 30*time.Second, c.Nomad.BlockingWait)
	must.Eq(t, "x/leader", c.Consul.LockKey)
	must.Eq(t, 15*time.Second, c.Consul.SessionTTL)
	must.Eq(t, "goodput", c.Policy.Name)
	must.Eq(t, 45*time.Second, c.Policy.RestartCost)
	must.Eq(t, 2, c.Policy.MaxChangesPerRound)
	must.Eq(t, "caravan/gpu", c.Capacity.Device)
	must.Eq(t, 4, c.Capacity.SharesPerGPU)
	must.Eq(t, "aud", c.Progress.Audience)
	must.True(t, c.Progress.RefuseWithoutACLs)
	must.Eq(t, "http://10.0.0.1:4646", c.NomadConfig().Address)
	must.Eq(t, "ml", c.NomadConfig().Namespace)
}

func TestLoad_EnvironmentFillsTheRest(t *testing.T) {
	t.Setenv("NOMAD_ADDR", "http://127.0.0.9:4646")
	t.Setenv("NOMAD_TOKEN", "secret")
	t.Setenv("CONSUL_HTTP_ADDR", "127.0.0.9:8500")
	f, err := ParseFlags(nil, io.Discard)
	must.NoError(t, err)
	c, err := Load(f)
	must.NoError(t, err)
	must.Eq(t, "http://127.0.0.9:4646", c.NomadConfig().Address)
	must.Eq(t, "secret", c.NomadConfig().SecretID)
	must.Eq(t, "127.0.0.9:8500", c.ConsulConfig().Address)
	p := writeFile(t, `nomad { address = "http://127.0.0.1:1" }`)
	f, err = ParseFlags([]string{"-config", p}, io.Discard)
	must.NoError(t, err)
	c, err = Load(f)
	must.NoError(t, err)
	must.Eq(t, "http://127.0.0.1:1", c.NomadConfig().Address) // the file wins over the environment
	must.Eq(t, "secret", c.NomadConfig().SecretID)
}

func TestLoad_Errors(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"bad duration", `policy { interval = "soon" }`, "policy.interval"},
		{"unknown attribute", `colour = "blue"`, "colour"},
		{"bad type", `port = "eighty"`, "port"},
		{"syntax", `policy {`, "planner.hcl"},
		{"invalid value", `policy { max_changes_per_round = 0 }`, "policy.max_changes_per_round"},
		{"short ttl", `consul { session_ttl = "1s" }`, "consul.session_ttl"},
		{"jwks max age over the key-removal bound", `progress { jwks_max_age = "6m" }`, "progress.jwks_max_age"},
		{"jwks max age too short", `progress { jwks_max_age = "1s" }`, "progress.jwks_max_age"},
		{"fixed gpus need shares", `capacity { gpus_per_node = 2 }`, "capacity.shares_per_gpu"},
		{"absurd max_samples", `progress { max_samples = 1e18 }`, "progress.max_samples"},
		{"absurd shares", `capacity { shares_per_gpu = 1000000 }`, "capacity.shares_per_gpu"},
		{"huge min_gain", `policy { min_gain = 1e300 }`, "policy.min_gain"},
		{"huge interval", `policy { interval = "100000h" }`, "policy.interval"},
		{"short ui token", `ui { token = "abc" }`, "ui.token"},
		{"ui token with a space", `ui { token = "0123456789 abcdefgh" }`, "ui.token"},
		{"ui stats interval", `ui { stats_interval = "10ms" }`, "ui.stats_interval"},
		{"ui unknown attribute", `ui { colour = "blue" }`, "colour"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFlags([]string{"-config", writeFile(t, tc.body)}, io.Discard)
			must.NoError(t, err)
			_, err = Load(f)
			must.Error(t, err)
			must.StrContains(t, err.Error(), tc.want)
		})
	}
	_, err := ParseFlags([]string{"stray"}, io.Discard)
	must.ErrorContains(t, err, `unexpected argument "stray"`)
	f, _ := ParseFlags([]string{"-config", "/nonexistent/planner.hcl"}, io.Discard)
	_, err = Load(f)
	must.ErrorIs(t, err, os.ErrNotExist)
}

func TestParseFlagsRejectsInvalidValues(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-log-level", "chatty"}, `-log-level: must be one of trace, debug, info, warn, error, off, got "chatty"`},
		{[]string{"-port", "-1"}, "-port: must be between 0 and 65535, got -1"},
		{[]string{"-port", "70000"}, "-port: must be between 0 and 65535, got 70000"},
		{[]string{"-dry-run", "stray"}, `unexpected argument "stray"`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := ParseFlags(tc.args, io.Discard)
			must.ErrorIs(t, err, cli.ErrUsage)
			must.ErrorContains(t, err, tc.want)
		})
	}
	f, err := ParseFlags([]string{"-log-level", "DEBUG"}, io.Discard)
	must.NoError(t, err)
	c, err := Load(f)
	must.NoError(t, err)
	must.Eq(t, "DEBUG", c.LogLevel)
}

func TestUsageListsSubcommands(t *testing.T) {
	var out strings.Builder
	_, err := ParseFlags([]string{"-h"}, &out)
	must.ErrorIs(t, err, flag.ErrHelp)
	for _, sub := range []string{"simulate", "report", "relay"} {
		must.StrContains(t, out.String(), "\n  "+sub+" ")
	}
}

func TestLoad_UI(t *testing.T) {
	f, err := ParseFlags([]string{"-config", writeFile(t, `ui {
  token          = "0123456789abcdef"
  stats_interval = "30s"
}`)}, io.Discard)
	must.NoError(t, err)
	c, err := Load(f)
	must.NoError(t, err)
	must.Eq(t, UI{Enabled: true, Token: "0123456789abcdef", StatsInterval: 30 * time.Second}, c.UI)
	must.Eq(t, UI{Enabled: true, StatsInterval: 10 * time.Second}, Default().UI)
}
