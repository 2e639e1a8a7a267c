package driver

import (
	"testing"

	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
	"github.com/shoenig/test/must"
)

// TestTaskConfigSchema_ParsesJobspecHCL decodes task config blocks the way
// Nomad does (hclspec, msgpack) and checks the checkpoint block's defaults.
func TestTaskConfigSchema_ParsesJobspecHCL(t *testing.T) {
	cases := []struct {
		name string
		hcl  string
		want *CheckpointConfig
	}{
		{"no checkpoint block", `config {
  command = "/bin/true"
  args    = ["a", "b"]
}`, nil},
		{"defaults", `config {
  command = "/bin/true"
  checkpoint {}
}`, &CheckpointConfig{Signal: "SIGUSR1", Timeout: "5m", OnRestoreError: OnRestoreErrorFail, Scope: ScopeAlloc}},
		{"everything", `config {
  command = "/bin/true"
  checkpoint {
    signal           = "SIGTERM"
    interval         = "10m"
    timeout          = "30s"
    on_restore_error = "start_fresh"
    scope            = "group"
    key              = "resnet50-imagenet"
  }
}`, &CheckpointConfig{Signal: "SIGTERM", Interval: "10m", Timeout: "30s", OnRestoreError: OnRestoreErrorStartFresh,
			Scope: ScopeGroup, Key: "resnet50-imagenet"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got TaskConfig
			hclutils.NewConfigParser(taskConfigSpec).ParseHCL(t, tc.hcl, &got)
			must.Eq(t, "/bin/true", got.Command)
			must.Eq(t, tc.want, got.Checkpoint)
			must.NoError(t, got.validate())
		})
	}
}
