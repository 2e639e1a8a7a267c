package policy

import (
	"container/heap"
	"fmt"
	"math"
	"sort"
)

// Pollux is the scheduling policy of Pollux (Qiao et al., OSDI'21), ported
// from the artifact (petuum/adaptdl, branch osdi21-artifact,
// simulator/pollux.py). Each job's SpeedModel is its fitted goodput; the
// policy never reads Remaining.
//
//   - Speedup: a job's goodput on a shape divided by its goodput at its fair
//     share (ceil(1/dominant share/jobs) workers on ceil(nodes x dominant
//     share) nodes); a job with no model yet has speedup w / fair workers.
//   - Scaled so that one node's worth of dominant share is speedup 1
//     (speedup x dominant share x nodes), and multiplied by the restart
//     factor max(age - restarts x 30 s, 0) / (age + 30 s) when the shape
//     changes.
//   - Objective: the power mean with p = -1 of the scaled speedups
//     (+1e-3), maximised; for p = -1 that is minimising the separable sum
//     of 1/(speedup + 1e-3) over jobs, a job without GPUs counting 1000.
//   - Optimiser: the artifact runs a genetic algorithm (NSGA-II, population
//     100, 100 generations). This port optimises the same objective with the
//     marginal-gain greedy the goodput policy uses (steps of up to two nodes'
//     worth of workers, the current size always a candidate); for a
//     separable objective with concave speedups on one resource the greedy
//     is exact. Placement is the shared pass (fewest nodes, distributed jobs
//     kept apart when there is a choice), where the artifact's repair allows
//     at most one distributed job per node.
//   - Ties go to less attained service, then earlier submission (the
//     artifact's job order).
type Pollux struct {
	// Lookahead bounds how many workers one greedy step may grant; 0 means
	// twice the largest node's GPU count.
	Lookahead int
}

// NewPollux returns the Pollux policy.
func NewPollux() *Pollux { return &Pollux{} }

// Name implements Policy.
func (*Pollux) Name() string { return "pollux" }

// Info implements Policy.
func (p *Pollux) Info() Info {
	return Info{Name: p.Name(), Class: ClassOnline, Traits: Traits{AdaptiveBatch: true},
		Summary: "Pollux (OSDI'21): p=-1 power mean of fair-share-normalised goodput speedups, restart penalty"}
}

// polluxPowerEps is the artifact's offset inside the power mean.
const polluxPowerEps = 1e-3

// polluxRestartDelay is the restart delay the artifact's penalty assumes.
const polluxRestartDelay = 30.0

type polluxRound struct {
	g      *goodputRound
	base   []float64 // goodput at the fair share (0: no model)
	fairW  []int
	scale  []float64 // dominant share x nodes
	factor []float64 // restart factor
}

func (p *polluxRound) speedup(i, w int) float64 {
	if w <= 0 {
		return 0
	}
	j := &p.g.in.Jobs[i]
	if j.Speed == nil || p.base[i] <= 0 {
		return float64(w) / float64(p.fairW[i])
	}
	return j.rate(w, 0, nodesFor(w, j.Worker, p.g.gpn)) / p.base[i]
}

func (p *polluxRound) value(i, w, ps int) float64 {
	s := p.speedup(i, w) * p.scale[i]
	if !sameShape(&p.g.in.Jobs[i], w, ps) && w > 0 {
		s *= p.factor[i]
	}
	return -1 / (s + polluxPowerEps)
}

// prepare computes each job's fair share, base goodput, scale and restart
// factor.
func (p *polluxRound) prepare() {
	g := p.g
	n := len(g.in.Jobs)
	p.base, p.fairW = make([]float64, n), make([]int, n)
	p.scale, p.factor = make([]float64, n), make([]float64, n)
	nodes := float64(len(g.in.Cluster.Nodes))
	for i := range g.in.Jobs {
		j := &g.in.Jobs[i]
		share := g.cap.share(j.Worker)
		p.scale[i] = share * nodes
		fw := 1
		if share > 0 {
			fw = max(int(math.Ceil(1/share/float64(n)-1e-9)), 1)
		}
		fn := max(int(math.Ceil(nodes*share-1e-9)), 1)
		p.fairW[i] = fw
		// The artifact evaluates the fair share even past the job's largest
		// feasible batch (its goodput is then 0 and the speedup undefined);
		// we step down to the largest fair size that runs.
		for w := fw; w >= 1 && j.Speed != nil; w-- {
			if r := j.rate(w, 0, min(fn, w)); r > 0 {
				p.base[i] = r
				break
			}
		}
		age := j.Age.Seconds()
		p.factor[i] = math.Max(age-float64(j.Restarts)*polluxRestartDelay, 0) / (age + polluxRestartDelay)
	}
}

// polluxOrder ranks jobs by priority, then attained service, then
// submission (the artifact sorts by attained service and creation time).
func polluxOrder(jobs []Job) []int {
	order := fifoOrder(jobs)
	sort.SliceStable(order, func(a, b int) bool {
		ja, jb := &jobs[order[a]], &jobs[order[b]]
		if ja.Priority != jb.Priority {
			return ja.Priority > jb.Priority
		}
		return ja.AttainedService < jb.AttainedService
	})
	return order
}

// Allocate implements Policy.
func (pp *Pollux) Allocate(in Input) (Plan, error) {
	if err := Validate(in); err != nil {
		return Plan{}, err
	}
	gpn := maxGPUsPerNode(in.Cluster)
	g := &goodputRound{in: in, cap: clusterTotals(in.Cluster), gpn: gpn, look: pp.Lookahead}
	g.free = g.cap
	if g.look <= 0 {
		g.look = 2 * gpn
	}
	p := &polluxRound{g: g}
	p.prepare()
	g.valueOf = p.value
	g.sizes = make([]size, len(in.Jobs))
	order := polluxOrder(in.Jobs)
	h := make(stepHeap, 0, len(order))
	queued := func(*size) string { return "queued: another job's speedup lifts the power mean more" }
	for r, i := range order {
		g.sizes[i].describe = queued
		if st := g.best(i, r); st.valid {
			heap.Push(&h, st)
		}
	}
	grantByGain(&h, in.Jobs, &g.free, g.sizes, g.best, func(s *size) string {
		i := s.last.job
		return fmt.Sprintf("pollux: %d workers, speedup %.2f over its fair share of %d; last step +%d %s",
			s.w, p.speedup(i, s.w), p.fairW[i], max(s.last.dw, s.last.dps), s.last.what)
	})
	return finishOpts(pp.Name(), in, g.sizes, order, true), nil
}
