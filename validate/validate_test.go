package validate

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// repoRoot is the repository root, where the help's examples run.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	must.NoError(t, err)
	return root
}

// shippedVars are the variables the shipped jobspecs require (no default),
// as their headers and the scripts pass them.
var shippedVars = map[string][]string{
	"planner.nomad.hcl":           {"caravan_bin=/opt/caravan/caravan"},
	"planner-train.nomad.hcl":     {"caravan_bin=/opt/caravan/caravan"},
	"planner-train-sim.nomad.hcl": {"caravan_bin=/opt/caravan/caravan", "state_dir=/tmp/caravan-sim"},
	"train-elastic.nomad.hcl":     {"caravan_bin=/opt/caravan/caravan"},
}

// TestValidate_ShippedJobspecs: every jobspec under jobspecs/ has no
// error (warnings are logged).
func TestValidate_ShippedJobspecs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "jobspecs", "*.nomad.hcl"))
	must.NoError(t, err)
	must.SliceNotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := Check(f, Vars{Args: shippedVars[filepath.Base(f)], Strict: true})
			must.SliceEmpty(t, r.Errors)
			for _, w := range r.Warnings {
				t.Log("warning:", w)
			}
		})
	}
}

// TestValidate_BadFiles: every error and warning of a bad file in one run,
// each naming where it is and its field, errors and warnings apart, and a
// summary line counting each.
func TestValidate_BadFiles(t *testing.T) {
	cases := []struct {
		file           string
		errs, warnings []string
	}{
		{"bad-checkpoint.nomad.hcl", []string{
			`group "train" task "trainer" config: command: must not be empty`,
			`group "train" task "trainer" config: work_dir: "relative/dir" must be an absolute path`,
			`group "train" task "trainer" config: oom_score_adj: must be within [0, 1000], got 5000`,
			`group "train" task "trainer" config: checkpoint.signal: unknown signal "SIGFOO"`,
			`group "train" task "trainer" config: checkpoint.interval: "10ms" is shorter than 100ms`,
			`group "train" task "trainer" config: checkpoint.timeout: must be positive`,
			`group "train" task "trainer" config: checkpoint.on_restore_error: "retry" must be "fail" or "start_fresh"`,
			`group "train" task "trainer" config: checkpoint.scope: "job" must be "alloc", "group" or "replica"`,
			`group "train" task "trainer" config: checkpoint.key: " padded" has leading or trailing space`,
			`group "train" task "other" config: commnd: Invalid label: No argument or block type is named "commnd"`,
		}, nil},
		{"bad-gpu-meta.nomad.hcl", []string{
			`job meta: invalid planner meta: caravan_max_workers: want an integer >= 1, got "many"`,
			`job meta: invalid planner meta: caravan_speed_model: want allreduce, ps-sync or ps-async, got "ring"`,
			`job meta: invalid planner meta: caravan_rightsize: want "recommend" or "apply", got "always"`,
			`job meta: invalid planner meta: caravan_max_gpu_shares: want an integer >= 1, got "0"`,
			`job meta: invalid planner meta: caravan_worker_group: group "workers" is not in the job`,
			`job meta: invalid planner meta: unknown meta key "caravan_min_worker": the planner does not read it, so it sets nothing (a typo?); did you mean "caravan_min_workers"?`,
			`job meta: invalid planner meta: group "worker" meta caravan_gang: the planner reads caravan_* keys from the job's meta only`,
			`group "worker" task "t" device "caravan/gpushare" count: 8 shares, but constraint[0] asks for GPUs split into 4`,
			`group "worker" task "t" device "caravan/gpushare" affinity[0].attribute: "${device.attr.idx}": the caravan GPU share groups have no attribute "idx"`,
			`group "worker" task "t" device "caravan-gpu" name: "caravan-gpu" matches no caravan GPU share device`,
		}, nil},
		{"bad-roles.nomad.hcl", []string{
			`group "train" task "restore" config: checkpoint.task: no task "countr" in group "train"`,
			`group "train" task "restore-late" config: checkpoint.intervall: Invalid label: No argument or block type is named "intervall"`,
			`group "train" task "restore-late" config: checkpoint.scope: "job" must be "alloc", "group" or "replica"`,
			`group "train" task "restore-late" config: checkpoint.role: "restore" needs lifecycle { hook = "prestart", sidecar = false }; this task has lifecycle hook "poststart" (sidecar false)`,
		}, []string{
			`group "train": the checkpoint.role tasks of task "counter" would read and write different checkpoints`,
			`group "gpu" task "t" device "caravan/gpushare" count: 6 shares, but the plugin splits each GPU into 4 by default`,
		}},
		{"bad-planner.hcl", []string{
			`decoding config: testdata/bad-planner.hcl:4,3-12: Unsupported argument; An argument named "intervall" is not expected here. Did you mean "interval"?`,
			`decoding config: testdata/bad-planner.hcl:13,3-11: Unsupported argument; An argument named "garantee" is not expected here.`,
			`testdata/bad-planner.hcl: policy.cooldown: invalid duration "soon"`,
			`testdata/bad-planner.hcl: queue "a": guarantee: "lots" is not a number of GPUs`,
			`testdata/bad-planner.hcl: queue "a": rightsize: want "recommend" or "apply", got "sometimes"`,
			`invalid queue config: queue "b": namespaces: namespace "x" is already in queue "a"`,
			`invalid queue config: queue "b": weight: must be in (0, 1000000], got -1`,
			`invalid queue config: queues.default: no queue named "ghost"`,
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			var out, errOut bytes.Buffer
			path := filepath.Join("testdata", tc.file)
			code := Run([]string{path}, &out, &errOut, nil)
			must.Eq(t, 1, code, must.Sprint(errOut.String()))
			want := Result{Errors: make([]error, len(tc.errs)), Warnings: tc.warnings}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			must.Eq(t, path+": "+want.Summary(), lines[0])
			must.Len(t, 1+len(tc.errs)+len(tc.warnings), lines, must.Sprint(out.String()))
			errLines, warnLines := lines[1:1+len(tc.errs)], lines[1+len(tc.errs):]
			for _, w := range tc.errs {
				must.True(t, hasLineWithPrefix(errLines, "  error: "+w), must.Sprintf("no error %q in\n%s", w, out.String()))
			}
			for _, w := range tc.warnings {
				must.True(t, hasLineWithPrefix(warnLines, "  warning: "+w), must.Sprintf("no warning %q in\n%s", w, out.String()))
			}
		})
	}
}

func hasLineWithPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// TestValidate_PlannerConfigs: planner config files are told from
// jobspecs by their blocks or named by -planner-config, and checked with
// the planner's loader; a good one passes.
func TestValidate_PlannerConfigs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		must.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	policyOnly := write("policy.hcl", "policy {\n  interval = \"never\"\n}\n")
	overlap := write("overlap.hcl", "queue \"a\" {\n  namespaces = [\"x\"]\n}\nqueue \"b\" {\n  namespaces = [\"x\"]\n}\n")
	empty := write("empty.hcl", "log_level = \"chatty\"\n")
	huge := write("huge.hcl", "queue \"a\" {\n  namespaces = [\"x\"]\n  guarantee = 100000\n}\n")
	cases := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"good, detected", []string{"testdata/planner-queues.hcl"}, 0, "testdata/planner-queues.hcl: ok"},
		{"good, by flag", []string{"-planner-config", "testdata/planner-queues.hcl"}, 0, "testdata/planner-queues.hcl: ok"},
		{"detected by a policy block", []string{policyOnly}, 1, `policy.interval: invalid duration "never"`},
		{"guarantees above any cluster are no error", []string{huge}, 0, huge + ": ok"},
		{"overlapping namespaces", []string{overlap}, 1, `queue "b": namespaces: namespace "x" is already in queue "a"`},
		{"no planner block: only by flag", []string{"-planner-config", empty}, 1, `log_level: must be one of`},
		{"no planner block: a jobspec", []string{empty}, 1, "parse: "},
		{"a jobspec by flag", []string{"-planner-config", "testdata/bad-roles.nomad.hcl"}, 1, `Unsupported block type`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Run(tc.args, &out, &errOut, nil)
			must.Eq(t, tc.wantCode, code, must.Sprintf("stdout %q stderr %q", out.String(), errOut.String()))
			must.StrContains(t, out.String(), tc.want)
		})
	}
}

// TestValidate_Usage: exit codes and errors of the command itself, and
// variables from the command line, files and the environment.
func TestValidate_Usage(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "v.nomad.hcl")
	must.NoError(t, os.WriteFile(spec, []byte(`variable "scope" {
  type = string
}
job "v" {
  group "g" {
    task "t" {
      driver = "caravan"
      config {
        command = "/bin/true"
        checkpoint {
          scope = var.scope
        }
      }
    }
  }
}
`), 0o644))
	varFile := filepath.Join(dir, "vars.hcl")
	must.NoError(t, os.WriteFile(varFile, []byte(`scope = "everything"`+"\n"), 0o644))
	cases := []struct {
		name     string
		args     []string
		environ  []string
		wantCode int
		wantOut  string
	}{
		{"no file", nil, nil, 2, "no FILE given"},
		{"bad flag", []string{"-nope", spec}, nil, 2, "-nope"},
		{"help", []string{"-h"}, nil, 0, "Examples, from the repository root"},
		{"missing file", []string{filepath.Join(dir, "nope.hcl")}, nil, 1, "FILE: open "},
		{"unset variable", []string{spec}, nil, 1, `Unset variable "scope"`},
		{"-var", []string{"-var", "scope=group", spec}, nil, 0, spec + ": ok"},
		{"-var bad value", []string{"-var", "scope=job", spec}, nil, 1, `checkpoint.scope: "job" must be`},
		{"-var-file", []string{"-var-file", varFile, spec}, nil, 1, `checkpoint.scope: "everything" must be`},
		{"NOMAD_VAR_", []string{spec}, []string{"NOMAD_VAR_scope=alloc"}, 0, spec + ": ok"},
		{"undeclared -var", []string{"-var", "scope=group", "-var", "other=1", spec}, nil, 1, `Undefined -var variable`},
		{"undeclared -var, not strict", []string{"-hcl2-strict=false", "-var", "scope=group", "-var", "other=1", spec}, nil, 0, spec + ": ok"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Run(tc.args, &out, &errOut, tc.environ)
			must.Eq(t, tc.wantCode, code, must.Sprintf("stdout %q stderr %q", out.String(), errOut.String()))
			must.StrContains(t, out.String()+errOut.String(), tc.wantOut)
		})
	}
}

// TestValidate_HelpExamplesRun runs every example of -h as written, from
// the repository root: each exits 0.
func TestValidate_HelpExamplesRun(t *testing.T) {
	root := repoRoot(t)
	t.Chdir(root)
	n := 0
	for _, line := range strings.Split(usage, "\n") {
		cmd, ok := strings.CutPrefix(line, "  caravan validate ")
		if !ok {
			continue
		}
		n++
		args := strings.Fields(strings.ReplaceAll(cmd, "$PWD", root))
		var out, errOut bytes.Buffer
		must.Eq(t, 0, Run(args, &out, &errOut, nil), must.Sprintf("%s\n%s%s", line, out.String(), errOut.String()))
	}
	must.Positive(t, n)
}
