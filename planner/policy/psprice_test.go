package policy

import (
	"testing"

	"github.com/shoenig/test/must"
)

// TestUnpricedParameterServerCostsAWorkersShare reproduces the live
// planner's "marginal gain 4.42e+09 s per unit share": the service accounts
// GPUs only, so a CPU-only parameter server had a dominant share of 1e-9 and
// any saving, however small, became a gain of ~1e9 s per share that beat
// every worker step. A server is now charged one worker's share.
func TestUnpricedParameterServerCostsAWorkersShare(t *testing.T) {
	// Two whole-GPU nodes, no CPU or memory accounted (as the service builds it).
	cluster := Cluster{Nodes: []Node{{ID: "a", GPUs: 2}, {ID: "b", GPUs: 2}}}
	// A server saves a little (the sync term w/p), a worker a lot.
	speed := SpeedFunc(func(s Shape) float64 {
		if s.Workers <= 0 || s.PS <= 0 {
			return 0
		}
		w, p := float64(s.Workers), float64(s.PS)
		return 1 / (1/w + 0.01*w/p)
	})
	// One worker (min = max), so the last unit granted is a server.
	j := Job{ID: "eb", Submitted: t0, Min: 1, Max: 1, MinPS: 1, MaxPS: 2,
		Worker: Demand{GPUMilli: MilliGPU}, Speed: speed, Remaining: 1000}
	plan, err := NewOptimus().Allocate(Input{Now: t0, Cluster: cluster, Jobs: []Job{j}})
	must.NoError(t, err)
	jp := plan.Jobs[0]
	must.Eq(t, 2, jp.PS)
	// The saving of the second server is 1000*(1.01-1.005) = 5 s; over a
	// worker's quarter of the cluster that is 20 s per share, never ~5e9.
	must.Between(t, 19, jp.Gain, 21, must.Sprintf("gain %g s per share", jp.Gain))
	must.StrContains(t, jp.Reason, "parameter server")
}
