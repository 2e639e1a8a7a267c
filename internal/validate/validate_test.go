package validate

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// repoRoot is the repository root, where the help's examples run.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
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

// TestValidate_ShippedJobspecs: every jobspec under jobspecs/ passes.
func TestValidate_ShippedJobspecs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "jobspecs", "*.nomad.hcl"))
	must.NoError(t, err)
	must.SliceNotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			errs := File(f, Vars{Args: shippedVars[filepath.Base(f)], Strict: true})
			must.SliceEmpty(t, errs)
		})
	}
}

// TestValidate_BadJobspecs: every error of a bad jobspec in one run, each
// naming where it is and its field.
func TestValidate_BadJobspecs(t *testing.T) {
	cases := []struct {
		file string
		want []string
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
			`group "train" task "other" config: Invalid label: No argument or block type is named "commnd"`,
		}},
		{"bad-gpu-meta.nomad.hcl", []string{
			`job meta: invalid planner meta: caravan_max_workers: want an integer >= 1, got "many"`,
			`job meta: invalid planner meta: caravan_speed_model: want allreduce, ps-sync or ps-async, got "ring"`,
			`job meta: invalid planner meta: caravan_worker_group: group "workers" is not in the job`,
			`job meta: invalid planner meta: unknown meta key "caravan_min_worker" is ignored; did you mean "caravan_min_workers"?`,
			`job meta: invalid planner meta: group "worker" meta caravan_gang: the planner reads caravan_* keys from the job's meta only`,
			`group "worker" task "t" device "caravan/gpushare" count: 8 shares, but constraint[0] asks for GPUs split into 4`,
			`group "worker" task "t" device "caravan/gpushare" affinity[0].attribute: "${device.attr.idx}": the caravan GPU share groups have no attribute "idx"`,
			`group "worker" task "t" device "caravan-gpu" name: "caravan-gpu" matches no caravan GPU share device`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Run([]string{filepath.Join("testdata", tc.file)}, &out, &errOut, nil)
			must.Eq(t, 1, code, must.Sprint(errOut.String()))
			got := out.String()
			must.StrContains(t, got, filepath.Join("testdata", tc.file)+": "+strconv.Itoa(len(tc.want))+" error(s)")
			for _, w := range tc.want {
				must.StrContains(t, got, "  - "+w)
			}
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
		{"no jobspec", nil, nil, 2, "no JOBSPEC given"},
		{"bad flag", []string{"-nope", spec}, nil, 2, "-nope"},
		{"help", []string{"-h"}, nil, 0, "Examples, from the repository root"},
		{"missing file", []string{filepath.Join(dir, "nope.hcl")}, nil, 1, "JOBSPEC: open "},
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
