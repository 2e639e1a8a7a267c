package simulator

import (
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
)

// ScaleInput builds a synthetic round of the size Optimus's paper reports
// (thousands of jobs on 16,000 nodes): jobs want 1 to 32 GPUs with
// diminishing returns, a tenth of them fractional-GPU, and every job holds
// the allocation a previous round gave it, so the round exercises both
// keeping and re-placing. Deterministic for a seed.
func ScaleInput(jobs, nodes int, seed uint64) policy.Input {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	in := policy.Input{Now: engine.Epoch}
	for n := 0; n < nodes; n++ {
		in.Cluster.Nodes = append(in.Cluster.Nodes, policy.Node{ID: fmt.Sprintf("node-%05d", n), GPUs: 4, CPUMHz: 64000, MemoryMB: 512000})
	}
	for i := 0; i < jobs; i++ {
		a, b := 0.5+4*r.Float64(), 0.005+0.1*r.Float64()
		j := policy.Job{
			ID:        fmt.Sprintf("job-%05d", i),
			Submitted: engine.Epoch.Add(time.Duration(r.IntN(86400)) * time.Second),
			Min:       1, Max: 1 + r.IntN(32),
			Worker: policy.Demand{GPUMilli: policy.MilliGPU, CPUMHz: 4000, MemoryMB: 16000},
			Speed: policy.SpeedFunc(func(s policy.Shape) float64 {
				w := float64(s.Workers)
				return w / (a + b*w + 0.05*float64(max(s.Nodes-1, 0)))
			}),
			Remaining:       1000 + 100000*r.Float64(),
			AttainedService: 50000 * r.Float64(),
			Age:             time.Duration(600+r.IntN(86400)) * time.Second,
		}
		if i%10 == 0 {
			j.Worker.GPUMilli = 500
			j.Max = 1 + r.IntN(4)
		}
		in.Jobs = append(in.Jobs, j)
	}
	return in
}

// WithCurrent returns in with every job holding what plan gave it.
func WithCurrent(in policy.Input, plan policy.Plan) policy.Input {
	out := in
	out.Jobs = append([]policy.Job(nil), in.Jobs...)
	for i := range out.Jobs {
		out.Jobs[i].Current = plan.Jobs[i].Allocation
	}
	return out
}

// TimeRound measures one allocation + placement round of a fresh policy on
// a steady-state input (jobs hold the previous round's plan): the median of
// runs.
func TimeRound(name string, jobs, nodes, runs int) (time.Duration, error) {
	in := ScaleInput(jobs, nodes, 1)
	p, err := policy.New(name)
	if err != nil {
		return 0, err
	}
	plan, err := p.Allocate(in)
	if err != nil {
		return 0, err
	}
	in = WithCurrent(in, plan)
	var ds []time.Duration
	for k := 0; k < runs; k++ {
		p, _ := policy.New(name)
		t0 := time.Now()
		if _, err := p.Allocate(in); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	sort.Slice(ds, func(a, b int) bool { return ds[a] < ds[b] })
	return ds[len(ds)/2], nil
}

// PrintScale prints the decision-speed table: one round for 2,000 to
// 16,000 jobs on 16,000 nodes, and the 8,000/4,000 time ratio.
func PrintScale(w io.Writer, policies []string) error {
	sizes := []int{2000, 4000, 8000, 16000}
	fmt.Fprintf(w, "Decision speed: one allocation + placement round on 16,000 nodes x 4 GPUs (median of 5)\n")
	fmt.Fprintf(w, "%-10s", "policy")
	for _, n := range sizes {
		fmt.Fprintf(w, " %11s", fmt.Sprintf("%d jobs", n))
	}
	fmt.Fprintf(w, " %14s\n", "8000/4000")
	for _, p := range policies {
		fmt.Fprintf(w, "%-10s", p)
		got := map[int]time.Duration{}
		for _, n := range sizes {
			d, err := TimeRound(p, n, 16000, 5)
			if err != nil {
				return err
			}
			got[n] = d
			fmt.Fprintf(w, " %11s", d.Round(time.Millisecond))
		}
		fmt.Fprintf(w, " %14.2f\n", float64(got[8000])/float64(got[4000]))
	}
	return nil
}
