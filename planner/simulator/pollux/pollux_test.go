package pollux

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/caravan-nomad/caravan/planner/workload"
	"github.com/shoenig/test/must"
)

func sharedData(t *testing.T) string {
	t.Helper()
	dir, err := FindData("")
	if err != nil {
		// polluxtest.Dir's rule (it imports this package, so this test
		// cannot import it): CARAVAN_REQUIRE_DATA=1 makes an absence fail.
		if os.Getenv("CARAVAN_REQUIRE_DATA") == "1" {
			t.Fatalf("shared Pollux data not present (CARAVAN_REQUIRE_DATA=1): %v", err)
		}
		t.Skip("shared Pollux data not present:", err)
	}
	return dir
}

func smallWorkload(t *testing.T, dir string, n int) ([]workload.Job, map[string]*Application) {
	t.Helper()
	apps, err := LoadApplications(dir)
	must.NoError(t, err)
	jobs, err := workload.ReadJobs(filepath.Join(dir, "workloads", "workload-1.csv"), Known(apps))
	must.NoError(t, err)
	// Keep the short-lived kinds so the replay stays fast.
	var out []workload.Job
	for _, j := range jobs {
		if j.Application == "cifar10" || j.Application == "ncf" {
			out = append(out, j)
		}
		if len(out) == n {
			break
		}
	}
	return out, apps
}

func TestCanonicalPlacement(t *testing.T) {
	cases := []struct {
		in   []int
		want string
	}{
		{[]int{1}, "1"},
		{[]int{2, 1, 1}, "112"},
		{[]int{4, 0, 2}, "24"},
		{[]int{1, 2, 1, 2}, "1212"},
		{[]int{3, 1, 2}, "123"},
	}
	for _, tc := range cases {
		must.Eq(t, tc.want, canonical(tc.in))
	}
}

func TestApplicationMatchesTraces(t *testing.T) {
	dir := sharedData(t)
	apps, err := LoadApplications(dir)
	must.NoError(t, err)
	a := apps["cifar10"]
	must.Eq(t, 100, a.MaxEpochs)
	must.Eq(t, 128.0, a.InitBatch)
	// A measured placement and batch returns the measured row.
	tr, err := workload.ReadTrace(filepath.Join(dir, "traces", "cifar10"))
	must.NoError(t, err)
	for _, row := range tr.Placements[:20] {
		st, sy := a.Throughput(row.Placement, row.LocalBsz)
		must.True(t, math.Abs(row.StepTime-st) < 1e-12 && math.Abs(row.SyncTime-sy) < 1e-12,
			must.Sprintf("placement %v bsz %v: %v,%v want %v,%v", row.Placement, row.LocalBsz, st, sy, row.StepTime, row.SyncTime))
	}
	// A measured scalability point (16 nodes) through the grid.
	for _, row := range tr.Scalability[:10] {
		st, _ := a.grid.at(row.Nodes, row.Replicas, row.LocalBsz)
		must.True(t, st > 0)
	}
	// Progress is monotone and the yolov3 override applies.
	for e := 1; e <= a.MaxEpochs; e++ {
		must.True(t, a.Progress(e) >= a.Progress(e-1))
	}
	must.Eq(t, 8.0, apps["yolov3"].MaxLocalBsz)
}

func TestSimulateDeterministicAndComplete(t *testing.T) {
	dir := sharedData(t)
	jobs, apps := smallWorkload(t, dir, 24)
	for _, p := range policy.Names() {
		t.Run(p, func(t *testing.T) {
			a, err := Simulate(engine.Config{}, p, jobs, apps)
			must.NoError(t, err)
			b, err := Simulate(engine.Config{}, p, jobs, apps)
			must.NoError(t, err)
			a.DecideTime, b.DecideTime = 0, 0
			must.True(t, reflect.DeepEqual(a, b), must.Sprintf("%s not deterministic", p))
			must.Eq(t, len(jobs), len(a.Jobs))
			for _, j := range a.Jobs {
				must.True(t, j.JCT > 0, must.Sprintf("%s: %s JCT %v", p, j.Name, j.JCT))
			}
			must.True(t, a.GPUUtil > 0 && a.GPUUtil <= 1.0001, must.Sprintf("util %v", a.GPUUtil))
		})
	}
}

func TestFindDataHasNoAbsoluteFallback(t *testing.T) {
	t.Setenv(DataEnv, "")
	t.Chdir(t.TempDir())
	dir, err := FindData("")
	// The test binary lives in a temporary build directory, away from any
	// checkout, so nothing may be found.
	if err == nil {
		must.StrNotContains(t, dir, "/work/shared", must.Sprint("found through a fixed path"))
		return
	}
	must.ErrorContains(t, err, "pass --data")

	t.Setenv(DataEnv, "/nonexistent")
	_, err = FindData("")
	must.ErrorContains(t, err, "$"+DataEnv)
}
