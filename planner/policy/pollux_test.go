package policy

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestInfosDeclareClassAndSummary(t *testing.T) {
	classes := map[Class]bool{ClassOracle: true, ClassDeclared: true, ClassOnline: true}
	for _, in := range Infos() {
		must.True(t, classes[in.Class], must.Sprintf("%s: class %q", in.Name, in.Class))
		must.NotEq(t, "", in.Summary)
		p, err := New(in.Name)
		must.NoError(t, err)
		must.Eq(t, in.Name, p.Name())
	}
	// The default policy is deployable: it must not need an oracle.
	best, _ := New(Best)
	must.Eq(t, ClassOnline, best.Info().Class)
	pollux, _ := New("pollux")
	must.Eq(t, ClassOnline, pollux.Info().Class)
	must.False(t, pollux.Info().Traits.UsesRemaining)
}

// TestPolluxGreedyMatchesBruteForce checks the claim in pollux.go: for
// concave speedups on one node the greedy finds the optimum of the p = -1
// power mean (the smallest sum of 1/(scaled speedup + 1e-3)).
func TestPolluxGreedyMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for trial := 0; trial < 60; trial++ {
		n := 2 + r.IntN(3)
		gpus := 1 + r.IntN(12)
		var jobs []Job
		for i := 0; i < n; i++ {
			j := gpuJob(string(rune('a'+i)), i, 1, 1+r.IntN(6), concave(0.2+r.Float64()*4, 0.01+r.Float64()), 0)
			j.Age = time.Duration(60+r.IntN(3600)) * time.Second
			jobs = append(jobs, j)
		}
		in := Input{Now: t0, Cluster: gpuCluster(1, gpus), Jobs: jobs}
		plan, err := NewPollux().Allocate(in)
		must.NoError(t, err)
		p := &polluxRound{g: &goodputRound{in: in, cap: clusterTotals(in.Cluster), gpn: gpus}}
		p.prepare()
		got := 0.0
		for i, jp := range plan.Jobs {
			got += p.value(i, jp.Workers, 0)
		}
		want := bruteForce(jobs, gpus, false, func(j, w int) float64 { return p.value(j, w, 0) })
		must.True(t, math.Abs(got-want) <= 1e-9*math.Abs(want), must.Sprintf("trial %d: greedy %v brute force %v", trial, got, want))
	}
}

// TestPolluxServesEveryJobFirst: with p = -1 a job without GPUs costs
// 1/1e-3, so every job gets a GPU before any job gets a second, and Pollux
// never reads Remaining.
func TestPolluxServesEveryJobFirst(t *testing.T) {
	lin := concave(1, 0)
	in := Input{Now: t0, Cluster: gpuCluster(1, 4)}
	for i, rem := range []float64{1, 1e6, 5, 1e9} {
		j := gpuJob(string(rune('a'+i)), i, 1, 4, lin, rem)
		j.Age = time.Hour
		in.Jobs = append(in.Jobs, j)
	}
	plan, err := NewPollux().Allocate(in)
	must.NoError(t, err)
	for _, jp := range plan.Jobs {
		must.Eq(t, 1, jp.Workers, must.Sprintf("%s: %s", jp.ID, jp.Reason))
	}
	// Remaining changes nothing.
	for i := range in.Jobs {
		in.Jobs[i].Remaining = float64(i + 1)
	}
	plan2, err := NewPollux().Allocate(in)
	must.NoError(t, err)
	for i := range plan.Jobs {
		must.Eq(t, plan.Jobs[i].Workers, plan2.Jobs[i].Workers)
	}
}

// TestPolluxRestartPenalty: a young job that would be reshaped pays the
// restart factor; keeping its shape does not.
func TestPolluxRestartPenalty(t *testing.T) {
	p := &polluxRound{g: &goodputRound{in: Input{Cluster: gpuCluster(1, 4)}, gpn: 4}}
	j := gpuJob("a", 0, 1, 4, concave(1, 0.1), 0)
	j.Age, j.Restarts = 90*time.Second, 2
	j.Current = Allocation{Workers: 2, Placement: []NodeAlloc{{Node: "n000", Workers: 2}}}
	p.g.in.Jobs = []Job{j}
	p.g.cap = clusterTotals(p.g.in.Cluster)
	p.prepare()
	must.Eq(t, 0.25, p.factor[0]) // (90 - 2 x 30) / (90 + 30)
	scaled := func(w int) float64 { return p.speedup(0, w) * p.scale[0] }
	must.Eq(t, -1/(scaled(2)+polluxPowerEps), p.value(0, 2, 0))
	must.Eq(t, -1/(0.25*scaled(3)+polluxPowerEps), p.value(0, 3, 0))
}

// TestOptimusArtifactPlacement: in artifact mode Optimus places the
// smallest jobs first, each on the nodes with the most free GPUs, as the
// Pollux artifact does; by default it packs the largest first.
func TestOptimusArtifactPlacement(t *testing.T) {
	in := Input{Now: t0, Cluster: gpuCluster(2, 4)}
	in.Jobs = append(in.Jobs,
		gpuJob("big", 0, 5, 5, concave(1, 0), 100),
		gpuJob("small", 1, 2, 2, concave(1, 0), 100))
	o := NewOptimus()
	o.UseArtifactMode()
	plan, err := o.Allocate(in)
	must.NoError(t, err)
	small, _ := plan.Job("small")
	big, _ := plan.Job("big")
	must.Eq(t, 1, small.Nodes())
	must.Eq(t, 2, big.Nodes())
	// small went first onto an empty node; big then took the other node's
	// four and one of the two left beside small.
	counts := map[string]int{}
	for _, na := range big.Placement {
		counts[na.Node] = na.Workers
	}
	smallNode := small.Placement[0].Node
	other := "n000"
	if smallNode == other {
		other = "n001"
	}
	must.Eq(t, 4, counts[other])
	must.Eq(t, 1, counts[smallNode])
}
