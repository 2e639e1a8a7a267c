package workload_test

import (
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/simulator/pollux/polluxtest"
	"github.com/caravan-nomad/caravan/planner/workload"
)

// TestReadSharedData reads the real shared files, found as the simulator
// finds them (pollux.FindData: $CARAVAN_POLLUX_DATA, else shared/data/pollux
// beside the checkout); without them it skips, or fails under make test
// (polluxtest.RequireEnv).
func TestReadSharedData(t *testing.T) {
	dir := polluxtest.Dir(t)
	traces, err := workload.ReadTraces(filepath.Join(dir, "traces"))
	must.NoError(t, err)
	must.Eq(t, 6, len(traces))
	known := map[string]bool{}
	for n := range traces {
		known[n] = true
	}
	for _, w := range []string{"workload-1", "workload-2", "workload-3", "workload-4"} {
		jobs, err := workload.ReadJobs(filepath.Join(dir, "workloads", w+".csv"), known)
		must.NoError(t, err)
		must.Eq(t, 160, len(jobs))
	}
	pub, err := workload.ReadPublished(filepath.Join(dir, "published-avg-jct.csv"))
	must.NoError(t, err)
	must.Eq(t, 12, len(pub))
}
