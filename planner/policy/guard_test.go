package policy

import (
	"testing"

	"github.com/shoenig/test/must"
)

// TestGuards_EveryPolicy: a long running job and a short waiting one want
// the same four GPUs. Under Keep or NoSuspend the running job keeps its
// workers under every registered policy, whatever its own ranking; Free
// leaves the choice to the policy.
func TestGuards_EveryPolicy(t *testing.T) {
	for _, name := range Names() {
		for g, gn := range map[Guard]string{Keep: "keep", NoSuspend: "no-suspend"} {
			t.Run(name+"/"+gn, func(t *testing.T) {
				pol, err := New(name)
				must.NoError(t, err)
				run := gpuJob("run", 10, 4, 4, concave(1, 0.1), 1e6)
				run.Gang = true
				run.Current = Allocation{Workers: 4, Placement: []NodeAlloc{{Node: "n000", Workers: 4}}}
				wait := gpuJob("wait", 0, 4, 4, concave(1, 0.1), 10)
				wait.Gang, wait.Priority = true, 5 // even a higher priority waits
				jobs := []Job{run, wait}
				guards := []Guard{g, Free}
				plan, err := pol.Allocate(Input{Now: t0, Cluster: gpuCluster(1, 4), Jobs: Guarded(jobs, guards)})
				must.NoError(t, err)
				HoldPlan(&plan, jobs, guards)
				must.Eq(t, 4, plan.Jobs[0].Workers, must.Sprintf("%s: %+v", name, plan.Jobs))
				must.Eq(t, 0, plan.Jobs[1].Workers, must.Sprintf("%s: %+v", name, plan.Jobs))
				must.Eq(t, 4, jobs[0].Max) // Guarded copies
			})
		}
	}
}

func TestExploreMax(t *testing.T) {
	cases := []struct {
		name                    string
		min, max, cur, measured int
		want                    int
	}{
		{"never measured", 1, 8, 1, 0, 1},
		{"doubles the largest measured", 1, 8, 1, 2, 4},
		{"bounded by max", 1, 3, 1, 2, 3},
		{"keeps what it asks", 1, 8, 6, 1, 6},
		{"never under its minimum", 4, 8, 0, 0, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := Job{Min: tc.min, Max: tc.max, Current: Allocation{Workers: tc.cur}}
			must.Eq(t, tc.want, ExploreMax(j, tc.measured))
		})
	}
}
