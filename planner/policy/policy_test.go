package policy

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// checkPlan asserts the invariants every plan must hold: per-node and
// per-GPU capacity, min/max/gang limits, placement sums, one plan per job.
func checkPlan(t *testing.T, in Input, plan Plan) {
	t.Helper()
	must.Eq(t, len(in.Jobs), len(plan.Jobs))
	type use struct {
		gpu      map[int]int
		cpu, mem int
	}
	nodes := map[string]Node{}
	for _, n := range in.Cluster.Nodes {
		nodes[n.ID] = n
	}
	used := map[string]*use{}
	for i, jp := range plan.Jobs {
		j := in.Jobs[i]
		must.Eq(t, j.ID, jp.ID)
		if jp.Workers == 0 {
			must.Eq(t, 0, jp.PS, must.Sprintf("job %s has PS but no workers", j.ID))
			must.SliceEmpty(t, jp.Placement)
			continue
		}
		must.GreaterEq(t, j.minWorkers(), jp.Workers, must.Sprintf("job %s below min", j.ID))
		must.LessEq(t, j.maxWorkers(), jp.Workers, must.Sprintf("job %s above max", j.ID))
		must.GreaterEq(t, j.MinPS, jp.PS)
		must.LessEq(t, max(j.MaxPS, j.MinPS), jp.PS)
		w, ps := 0, 0
		for _, na := range jp.Placement {
			n, ok := nodes[na.Node]
			must.True(t, ok, must.Sprintf("unknown node %s", na.Node))
			u := used[na.Node]
			if u == nil {
				u = &use{gpu: map[int]int{}}
				used[na.Node] = u
			}
			w += na.Workers
			ps += na.PS
			u.cpu += na.Workers*j.Worker.CPUMHz + na.PS*j.PSDem.CPUMHz
			u.mem += na.Workers*j.Worker.MemoryMB + na.PS*j.PSDem.MemoryMB
			if j.Worker.GPUMilli > 0 {
				per := max(j.Worker.GPUMilli/MilliGPU, 1)
				must.Eq(t, na.Workers*per, len(na.GPUs), must.Sprintf("job %s GPU list on %s", j.ID, na.Node))
				for _, g := range na.GPUs {
					must.True(t, g >= 0 && g < n.GPUs, must.Sprintf("GPU index %d on %s", g, na.Node))
					u.gpu[g] += min(j.Worker.GPUMilli, MilliGPU)
				}
			}
		}
		must.Eq(t, jp.Workers, w, must.Sprintf("job %s placement sums to %d workers", j.ID, w))
		must.Eq(t, jp.PS, ps)
	}
	for id, u := range used {
		n := nodes[id]
		must.LessEq(t, n.CPUMHz, u.cpu, must.Sprintf("CPU over on %s", id))
		must.LessEq(t, n.MemoryMB, u.mem, must.Sprintf("memory over on %s", id))
		for g, m := range u.gpu {
			must.LessEq(t, MilliGPU, m, must.Sprintf("GPU %d over on %s: %d milli", g, id, m))
		}
	}
}

func TestPoliciesRespectCapacityAndLimits(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(11, uint64(len(name))))
			p, err := New(name)
			must.NoError(t, err)
			for trial := 0; trial < 40; trial++ {
				in := randomInput(r, 1+r.IntN(12), 1+r.IntN(40))
				plan, err := p.Allocate(in)
				must.NoError(t, err)
				checkPlan(t, in, plan)
				// Feed the plan back as the current state: the next round
				// must hold the invariants too.
				for i := range in.Jobs {
					in.Jobs[i].Current = plan.Jobs[i].Allocation
				}
				plan2, err := p.Allocate(in)
				must.NoError(t, err)
				checkPlan(t, in, plan2)
			}
		})
	}
}

func TestPoliciesDeterministic(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			in := randomInput(rand.New(rand.NewPCG(5, 5)), 10, 60)
			a, _ := New(name)
			b, _ := New(name)
			pa, err := a.Allocate(in)
			must.NoError(t, err)
			pb, err := b.Allocate(in)
			must.NoError(t, err)
			must.True(t, reflect.DeepEqual(pa, pb))
		})
	}
}

// bruteForce finds the best objective over all sizes w_j in {0} or
// [min_j, max_j] with sum of workers <= gpus.
func bruteForce(jobs []Job, gpus int, admitAll bool, value func(j int, w int) float64) float64 {
	best := math.Inf(-1)
	var rec func(i, left int, acc float64)
	rec = func(i, left int, acc float64) {
		if i == len(jobs) {
			best = math.Max(best, acc)
			return
		}
		if !admitAll {
			rec(i+1, left, acc+value(i, 0))
		}
		for w := jobs[i].minWorkers(); w <= jobs[i].maxWorkers() && w <= left; w++ {
			rec(i+1, left-w, acc+value(i, w))
		}
	}
	rec(0, gpus, 0)
	return best
}

func TestOptimusGreedyMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for trial := 0; trial < 60; trial++ {
		n := 2 + r.IntN(3)
		gpus := n + r.IntN(10)
		var jobs []Job
		for i := 0; i < n; i++ {
			jobs = append(jobs, gpuJob(string(rune('a'+i)), i, 1, 1+r.IntN(6), concave(0.2+r.Float64()*4, 0.01+r.Float64()), 10+r.Float64()*1000))
		}
		in := Input{Now: t0, Cluster: gpuCluster(1, gpus), Jobs: jobs}
		plan, err := NewOptimus().Allocate(in)
		must.NoError(t, err)
		remaining := func(j, w int) float64 { return jobs[j].Remaining / jobs[j].rate(w, 0, 1) }
		got := 0.0
		for i, jp := range plan.Jobs {
			got -= remaining(i, jp.Workers)
		}
		want := bruteForce(jobs, gpus, true, func(j, w int) float64 { return -remaining(j, w) })
		must.True(t, math.Abs(got-want) <= 1e-9*math.Abs(want), must.Sprintf("trial %d: greedy %v brute force %v", trial, got, want))
	}
}

func TestGoodputGreedyMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for trial := 0; trial < 60; trial++ {
		n := 2 + r.IntN(3)
		gpus := 1 + r.IntN(12)
		var jobs []Job
		for i := 0; i < n; i++ {
			jobs = append(jobs, gpuJob(string(rune('a'+i)), i, 1, 1+r.IntN(6), concave(0.2+r.Float64()*4, 0.01+r.Float64()), 10+r.Float64()*1000))
		}
		in := Input{Now: t0, Cluster: gpuCluster(1, gpus), Jobs: jobs}
		plan, err := NewGoodput().Allocate(in)
		must.NoError(t, err)
		g := &goodputRound{in: in, cap: clusterTotals(in.Cluster), gpn: gpus}
		g.weights()
		got := 0.0
		for i, jp := range plan.Jobs {
			got += g.value(i, jp.Workers, 0)
		}
		want := bruteForce(jobs, gpus, false, func(j, w int) float64 { return g.value(j, w, 0) })
		must.True(t, math.Abs(got-want) <= 1e-9*math.Abs(want), must.Sprintf("trial %d: greedy %v brute force %v", trial, got, want))
	}
}

func TestGangAllOrNothing(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			in := Input{Now: t0, Cluster: gpuCluster(2, 4)}
			big := gpuJob("big", 0, 6, 6, concave(1, 0.01), 1000)
			big.Gang = true
			small := gpuJob("small", 1, 3, 3, concave(1, 0.01), 1000)
			small.Gang = true
			in.Jobs = []Job{big, small}
			p, _ := New(name)
			plan, err := p.Allocate(in)
			must.NoError(t, err)
			checkPlan(t, in, plan)
			for _, jp := range plan.Jobs {
				must.True(t, jp.Workers == 0 || jp.Workers >= 3, must.Sprintf("%s got %d", jp.ID, jp.Workers))
			}
			total := plan.Jobs[0].Workers + plan.Jobs[1].Workers
			must.LessEq(t, 8, total)
		})
	}
}

func TestPlacementFewestNodesEqualSplit(t *testing.T) {
	cases := []struct {
		name    string
		workers int
		nodes   int
		perNode []int
	}{
		{"fits one node", 4, 1, []int{4}},
		{"two full nodes", 8, 2, []int{4, 4}},
		{"equal split", 6, 2, []int{3, 3}},
		{"three nodes", 9, 3, []int{3, 3, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Now: t0, Cluster: gpuCluster(4, 4)}
			j := gpuJob("j", 0, tc.workers, tc.workers, concave(1, 0.01), 100)
			j.Gang = true
			in.Jobs = []Job{j}
			plan, err := NewFIFO().Allocate(in)
			must.NoError(t, err)
			jp := plan.Jobs[0]
			must.Eq(t, tc.nodes, jp.Nodes())
			var got []int
			for _, na := range jp.Placement {
				got = append(got, na.Workers)
			}
			must.Eq(t, tc.perNode, got)
		})
	}
}

func TestPlacementPacksFractionalGPUs(t *testing.T) {
	in := Input{Now: t0, Cluster: gpuCluster(2, 2)}
	for i := 0; i < 4; i++ {
		j := gpuJob(string(rune('a'+i)), i, 1, 1, concave(1, 0.01), 100)
		j.Worker.GPUMilli = 250
		in.Jobs = append(in.Jobs, j)
	}
	plan, err := NewFIFO().Allocate(in)
	must.NoError(t, err)
	checkPlan(t, in, plan)
	gpus := map[[2]any]int{}
	for _, jp := range plan.Jobs {
		must.Eq(t, 1, jp.Workers)
		gpus[[2]any{jp.Placement[0].Node, jp.Placement[0].GPUs[0]}]++
	}
	must.Eq(t, 1, len(gpus), must.Sprintf("four quarter-GPU workers should share one GPU: %v", gpus))
}

func TestPlacementAvoidsSharingNodesBetweenDistributedJobs(t *testing.T) {
	// Four 4-GPU nodes; a distributed job already holds 2+2 on n000/n001.
	// A new 4-worker gang must not go where it would span those nodes.
	in := Input{Now: t0, Cluster: gpuCluster(4, 4)}
	a := gpuJob("a", 0, 4, 4, concave(1, 0.01), 100)
	a.Gang = true
	a.Current = Allocation{Workers: 4, Placement: []NodeAlloc{{Node: "n000", Workers: 2}, {Node: "n001", Workers: 2}}}
	b := gpuJob("b", 1, 6, 6, concave(1, 0.01), 100)
	b.Gang = true
	in.Jobs = []Job{a, b}
	plan, err := NewFIFO().Allocate(in)
	must.NoError(t, err)
	checkPlan(t, in, plan)
	must.False(t, plan.Jobs[0].Changed)
	for _, na := range plan.Jobs[1].Placement {
		must.True(t, na.Node == "n002" || na.Node == "n003", must.Sprintf("b placed on %s", na.Node))
	}
}

func TestUnchangedJobsKeepPlacement(t *testing.T) {
	in := randomInput(rand.New(rand.NewPCG(8, 9)), 6, 20)
	p := NewOptimus()
	plan, err := p.Allocate(in)
	must.NoError(t, err)
	for i := range in.Jobs {
		in.Jobs[i].Current = plan.Jobs[i].Allocation
	}
	plan2, err := p.Allocate(in)
	must.NoError(t, err)
	for i, jp := range plan2.Jobs {
		if jp.Workers == plan.Jobs[i].Workers && jp.PS == plan.Jobs[i].PS {
			must.False(t, jp.Changed, must.Sprintf("job %s moved without a size change", jp.ID))
		}
	}
}

func TestTiresiasDemotesAfterThreshold(t *testing.T) {
	in := Input{Now: t0, Cluster: gpuCluster(1, 4)}
	old := gpuJob("old", 0, 4, 4, nil, 0)
	old.Gang = true
	old.AttainedService = TiresiasQueueThreshold + 1
	young := gpuJob("young", 100, 4, 4, nil, 0)
	young.Gang = true
	in.Jobs = []Job{old, young}
	plan, err := NewTiresias().Allocate(in)
	must.NoError(t, err)
	must.Eq(t, 0, plan.Jobs[0].Workers)
	must.Eq(t, 4, plan.Jobs[1].Workers)
	// FIFO has no demotion: the old job keeps running.
	plan, err = NewFIFO().Allocate(in)
	must.NoError(t, err)
	must.Eq(t, 4, plan.Jobs[0].Workers)
}

func TestGoodputPrefersShortJobsAndPriority(t *testing.T) {
	in := Input{Now: t0, Cluster: gpuCluster(1, 1)}
	long := gpuJob("long", 0, 1, 1, concave(1, 0), 100000)
	short := gpuJob("short", 10, 1, 1, concave(1, 0), 100)
	in.Jobs = []Job{long, short}
	plan, err := NewGoodput().Allocate(in)
	must.NoError(t, err)
	must.Eq(t, 0, plan.Jobs[0].Workers)
	must.Eq(t, 1, plan.Jobs[1].Workers)
	in.Jobs[0].Priority = 1
	plan, err = NewGoodput().Allocate(in)
	must.NoError(t, err)
	must.Eq(t, 1, plan.Jobs[0].Workers)
}

func TestGoodputRestartAware(t *testing.T) {
	// A running job at 2 workers; a third GPU would make it 1% faster: not
	// worth a restart, so it keeps its shape.
	in := Input{Now: t0, Cluster: gpuCluster(1, 4)}
	flat := SpeedFunc(func(s Shape) float64 { return math.Min(float64(s.Workers), 2) + 0.01*float64(s.Workers) })
	j := gpuJob("j", 0, 1, 4, flat, 10000)
	j.Current = Allocation{Workers: 2, Placement: []NodeAlloc{{Node: "n000", Workers: 2}}}
	j.Age = 600e9
	in.Jobs = []Job{j}
	plan, err := NewGoodput().Allocate(in)
	must.NoError(t, err)
	must.Eq(t, 2, plan.Jobs[0].Workers)
	must.False(t, plan.Jobs[0].Changed)
}

func TestValidateErrors(t *testing.T) {
	ok := gpuJob("a", 0, 1, 2, nil, 0)
	cases := []struct {
		name string
		mut  func(in *Input)
	}{
		{"duplicate job", func(in *Input) { in.Jobs = append(in.Jobs, ok) }},
		{"empty id", func(in *Input) { in.Jobs[0].ID = "" }},
		{"max below min", func(in *Input) { in.Jobs[0].Min, in.Jobs[0].Max = 3, 2 }},
		{"negative demand", func(in *Input) { in.Jobs[0].Worker.CPUMHz = -1 }},
		{"fractional above one GPU", func(in *Input) { in.Jobs[0].Worker.GPUMilli = 1500 }},
		{"GPU parameter server", func(in *Input) { in.Jobs[0].PSDem.GPUMilli = 100 }},
		{"duplicate node", func(in *Input) { in.Cluster.Nodes = append(in.Cluster.Nodes, in.Cluster.Nodes[0]) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Now: t0, Cluster: gpuCluster(1, 4), Jobs: []Job{ok}}
			tc.mut(&in)
			for _, name := range Names() {
				p, _ := New(name)
				_, err := p.Allocate(in)
				must.True(t, errors.Is(err, ErrInvalidInput), must.Sprintf("%s: %v", name, err))
			}
		})
	}
	_, err := New("nope")
	must.True(t, errors.Is(err, ErrUnknownPolicy))
}

// TestCurrentWithoutPSLocationsIsKept: the live service knows where a job's
// workers run but not its parameter servers; such a job must not be
// reported Changed when its shape stays.
func TestCurrentWithoutPSLocationsIsKept(t *testing.T) {
	in := Input{Now: t0, Cluster: gpuCluster(2, 4)}
	j := gpuJob("ps", 0, 2, 2, concave(1, 0.01), 1000)
	j.MinPS, j.MaxPS = 1, 1
	j.PSDem = Demand{CPUMHz: 1000, MemoryMB: 1000}
	j.Current = Allocation{Workers: 2, PS: 1, Placement: []NodeAlloc{{Node: "n001", Workers: 2}}}
	in.Jobs = []Job{j}
	for _, name := range Names() {
		p, _ := New(name)
		plan, err := p.Allocate(in)
		must.NoError(t, err)
		checkPlan(t, in, plan)
		jp := plan.Jobs[0]
		must.Eq(t, 2, jp.Workers, must.Sprintf("%s", name))
		must.Eq(t, 1, jp.PS)
		must.False(t, jp.Changed, must.Sprintf("%s: %s", name, jp.Reason))
		must.Eq(t, "n001", jp.Placement[0].Node)
	}
}

// TestGoodputRunsUnmodelledJobs: a job without a speed model yet (a new
// kind) must run first so it gets measured, whatever the others' models say.
func TestGoodputRunsUnmodelledJobs(t *testing.T) {
	in := Input{Now: t0, Cluster: gpuCluster(1, 4)}
	for i := 0; i < 4; i++ {
		j := gpuJob(string(rune('a'+i)), i, 1, 4, concave(0.1, 0.001), 10)
		j.Current = Allocation{Workers: 1, Placement: []NodeAlloc{{Node: "n000", Workers: 1}}}
		j.Age = time.Hour
		in.Jobs = append(in.Jobs, j)
	}
	in.Jobs = append(in.Jobs, gpuJob("new", 99, 1, 1, nil, 0))
	plan, err := NewGoodput().Allocate(in)
	must.NoError(t, err)
	checkPlan(t, in, plan)
	must.Eq(t, 1, plan.Jobs[4].Workers, must.Sprintf("%s", plan.Jobs[4].Reason))
}

// TestGoodputRanksAtFairShare: heSRPT's ranking and speedup normalisation
// use the job's fair share of the cluster, not its minimum. "scales" has more
// work but scales linearly, so at its fair share (4 of 8 GPUs between two
// jobs) it finishes first; "flat" cannot use a second GPU.
func TestGoodputRanksAtFairShare(t *testing.T) {
	linear := SpeedFunc(func(s Shape) float64 { return float64(s.Workers) })
	flat := SpeedFunc(func(s Shape) float64 { return math.Min(float64(s.Workers), 1) })
	in := Input{Now: t0, Cluster: gpuCluster(2, 4), Jobs: []Job{
		gpuJob("scales", 0, 1, 8, linear, 100), // 100 s on one GPU, 25 s on four
		gpuJob("flat", 1, 1, 8, flat, 40),      // 40 s on any size
	}}
	g := &goodputRound{in: in, cap: clusterTotals(in.Cluster), gpn: 4}
	must.Eq(t, 4, g.fairWorkers(&in.Jobs[0]))
	g.weights()
	must.Eq(t, 25.0, g.t1[0])
	must.Eq(t, 40.0, g.t1[1])
	// The shorter job at the fair share gets heSRPT's larger weight; the
	// weight multiplies the speedup over the fair-share rate.
	must.Eq(t, math.Sqrt(3)/4, g.weight[0])
	must.Eq(t, 1.0, g.weight[1])
	// The fair share is clamped to the job's maximum and minimum.
	in.Jobs[1].Max = 2
	must.Eq(t, 2, g.fairWorkers(&in.Jobs[1]))
	in.Jobs[1].Min, in.Jobs[1].Max = 6, 8
	must.Eq(t, 6, g.fairWorkers(&in.Jobs[1]))
}
