package simulator

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/internal/cli"
	"github.com/caravan-nomad/caravan/planner/simulator/pollux"
	"github.com/caravan-nomad/caravan/planner/simulator/pollux/polluxtest"
)

// expensiveExamples name the flags of usage examples that replay whole
// traces or time huge rounds (seconds to minutes, more under -race): their
// flags are checked, they are not run here (`make bench` runs the table
// and the scale rounds; the replays have their own tests).
var expensiveExamples = []string{"--table", "--philly", "--philly-queues", "--sweep", "--scale", "--queue-scale", "--packing"}

// TestUsageExamples runs every cheap example of `caravan planner simulate
// --help` as written, in order, in a scratch directory with the shared
// data found as from the repository root (a later example may read what an
// earlier one wrote, like w.csv); the expensive ones must name defined
// flags only.
func TestUsageExamples(t *testing.T) {
	dir := polluxtest.Dir(t)
	t.Setenv(pollux.DataEnv, dir)
	t.Chdir(t.TempDir())
	exs := cli.Examples(usage, "caravan planner simulate")
	must.SliceNotEmpty(t, exs)

	var help bytes.Buffer
	must.Eq(t, 0, run([]string{"--help"}, &help, &help))
	defined := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z-]+)`).FindAllStringSubmatch(help.String(), -1) {
		defined[m[1]] = true
	}
	for _, ex := range exs {
		t.Run(ex.Line, func(t *testing.T) {
			for _, a := range ex.Args {
				if name, ok := strings.CutPrefix(a, "--"); ok {
					must.True(t, defined[name], must.Sprintf("--%s is not a flag of simulate", name))
				}
			}
			if slices.ContainsFunc(ex.Args, func(a string) bool { return slices.Contains(expensiveExamples, a) }) {
				return
			}
			var stdout, stderr bytes.Buffer
			rc := run(ex.Args, &stdout, &stderr)
			must.Eq(t, 0, rc, must.Sprintf("%s\n%s", ex.Line, stderr.String()))
			if ex.Stdout != "" {
				must.NoError(t, os.WriteFile(ex.Stdout, stdout.Bytes(), 0o644))
			}
			if i := slices.Index(ex.Args, "--out"); i >= 0 {
				files, _ := filepath.Glob(filepath.Join(ex.Args[i+1], "*"))
				must.SliceNotEmpty(t, files, must.Sprint("--out wrote nothing"))
			}
		})
	}
}

// TestWorkloadErrorNamesTheFlag: a --workload that exists neither as given
// nor in the data directory fails with an error naming the flag.
func TestWorkloadErrorNamesTheFlag(t *testing.T) {
	dir := polluxtest.Dir(t)
	t.Setenv(pollux.DataEnv, dir)
	t.Chdir(t.TempDir())
	var stdout, stderr bytes.Buffer
	must.Eq(t, 1, run([]string{"--workload", "workloads/no-such.csv"}, &stdout, &stderr))
	must.StrContains(t, stderr.String(), "--workload workloads/no-such.csv: no such file")
}
