package driver

import (
	"fmt"
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

// TestDriver_BadTaskConfigReportsEveryError: StartTask refuses a config
// with several bad fields naming every one of them, on one line (a task
// event), not only the first.
func TestDriver_BadTaskConfigReportsEveryError(t *testing.T) {
	td := newTestDriver(t, t.TempDir())
	tc := &TaskConfig{WorkDir: "rel", OOMScoreAdj: 2000, Checkpoint: &CheckpointConfig{
		Signal: "SIGNOPE", Interval: "often", Timeout: "0s", OnRestoreError: "retry", Scope: "job", Key: " padded",
	}}
	cfg := newTask(t, td, "client1", tc)
	_, _, err := td.StartTask(cfg)
	must.Error(t, err)
	for _, field := range []string{"command:", "work_dir:", "oom_score_adj:", "checkpoint.signal:", "checkpoint.interval:",
		"checkpoint.timeout:", "checkpoint.on_restore_error:", "checkpoint.scope:", "checkpoint.key:"} {
		must.StrContains(t, err.Error(), field)
	}
	must.StrNotContains(t, err.Error(), "\n")
}

// TestValidateTaskConfig checks task config blocks as jobspec2 hands them
// over, before submission: every error at once, each naming its field;
// runtime interpolations are accepted where a path is.
func TestValidateTaskConfig(t *testing.T) {
	ck := func(kv ...string) []any {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return []any{m}
	}
	cases := []struct {
		name   string
		config map[string]any
		want   []string
	}{
		{"minimal", map[string]any{"command": "caravan"}, nil},
		{"checkpoint defaults", map[string]any{"command": "caravan", "args": []any{"trainer", 20000}, "checkpoint": ck()}, nil},
		{"interpolations", map[string]any{"command": "${NOMAD_TASK_DIR}/run", "work_dir": "${NOMAD_ALLOC_DIR}",
			"args":       []any{"-node", "${attr.unique.hostname}", "${node.unique.name}"},
			"checkpoint": ck("key", "${NOMAD_JOB_ID}-state")}, nil},
		{"missing command", map[string]any{"args": []any{"x"}}, []string{"command: must not be empty"}},
		{"every field error", map[string]any{"command": "", "work_dir": "rel", "oom_score_adj": 2000,
			"checkpoint": ck("signal", "SIGNOPE", "interval", "1ms", "timeout", "soon", "on_restore_error", "retry", "scope", "job")},
			[]string{"command:", "work_dir:", "oom_score_adj:", "checkpoint.signal:", "checkpoint.interval:", "checkpoint.timeout:",
				"checkpoint.on_restore_error:", "checkpoint.scope:"}},
		{"unknown attributes", map[string]any{"command": "x", "commnd": "y", "checkpoint": ck("scop", "group")},
			[]string{`"commnd"`, `"scop"`}},
		{"wrong type", map[string]any{"command": "x", "oom_score_adj": "high"}, []string{"oom_score_adj"}},
		{"a typo does not hide its block's other errors", map[string]any{"command": "x", "checkpoint": ck("intervall", "1m", "scope", "job")},
			[]string{`checkpoint.intervall: `, `checkpoint.scope: "job" must be`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidateTaskConfig(tc.config)
			msg := fmt.Sprint(errs)
			must.Len(t, len(tc.want), errs, must.Sprint(msg))
			for _, w := range tc.want {
				must.StrContains(t, msg, w)
			}
		})
	}
}
