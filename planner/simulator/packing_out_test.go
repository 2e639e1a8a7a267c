package simulator

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/caravan-nomad/caravan/planner/simulator/pollux"
	"github.com/caravan-nomad/caravan/planner/simulator/pollux/polluxtest"
	"github.com/shoenig/test/must"
)

// TestPacking_TableAndFiles runs `simulate --packing` small (the Pollux
// workloads, one mix, time-sliced) and checks the table and --out's files.
func TestPacking_TableAndFiles(t *testing.T) {
	t.Setenv(pollux.DataEnv, polluxtest.Dir(t))
	dir := t.TempDir()
	var out, errb bytes.Buffer
	rc := run([]string{"--packing", "--packing-traces", "pollux", "--packing-mixes", "gpu-bound", "--packing-modes", "time-sliced",
		"--workers", "2", "--out", dir}, &out, &errb)
	must.Eq(t, 0, rc, must.Sprint(errb.String()))
	must.StrContains(t, out.String(), "MODELLED interference, SYNTHETIC profiles")
	must.StrContains(t, out.String(), "pollux gpu-bound time-sliced")
	for _, f := range []string{FilePackingCSV, FilePackingJSON, FilePackingUtil, FilePackingJCT} {
		st, err := os.Stat(filepath.Join(dir, f))
		must.NoError(t, err)
		must.Positive(t, st.Size())
	}
	b, err := os.ReadFile(filepath.Join(dir, FilePackingJSON))
	must.NoError(t, err)
	must.StrContains(t, string(b), `"synthetic_profiles": true`)
}

func TestPacking_BadFlagsNameTheFlag(t *testing.T) {
	cases := map[string][]string{
		"--packing-mixes":  {"--packing", "--packing-mixes", "nope"},
		"--packing-modes":  {"--packing", "--packing-modes", "mig"},
		"--packing-traces": {"--packing", "--packing-traces", "alibaba"},
	}
	t.Setenv(pollux.DataEnv, polluxtest.Dir(t))
	for flag, args := range cases {
		t.Run(flag, func(t *testing.T) {
			var out, errb bytes.Buffer
			must.Eq(t, 2, run(args, &out, &errb))
			must.StrContains(t, errb.String(), flag)
		})
	}
}
