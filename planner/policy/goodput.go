package policy

import (
	"container/heap"
	"fmt"
	"math"
	"sort"
)

// Goodput is caravan's default policy (class online: its caller estimates
// Remaining from what the job has shown). It keeps Optimus's marginal-gain
// greedy with a heap, and changes what a unit is worth so that the greedy
// minimises average job completion time rather than the sum of remaining
// times:
//
//   - Objective (heSRPT, Berg et al., SIGMETRICS'20): for malleable jobs
//     with concave speedup, the allocation minimising mean response time
//     serves every job but gives more to jobs with less remaining work, by
//     rank rather than by size. We maximise sum_j c_j * speedup_j(w_j) where
//     jobs are ranked by predicted remaining time at their fair share of
//     the cluster, speedup is relative to the rate at that fair share (as
//     in Pollux), and c = sqrt(2i-1) for the i-th longest job (heSRPT's
//     weights for a square-root speedup). Optimus's gain, the absolute
//     seconds saved, instead favours long jobs: a GPU saves more seconds on
//     a 12-hour job than on a 10-minute one.
//   - Goodput: the job's SpeedModel is expected to predict goodput
//     (throughput times statistical efficiency, from the gradient noise the
//     job reports), so a worker that only buys a larger, less efficient
//     batch is worth little.
//   - Restart cost: starting a job costs its RestartCost before progress;
//     reshaping a running job discounts its rate by Pollux's restart factor
//     (the share of its lifetime that stays productive after one more
//     restart) at its ResizeCost, so jobs reshaped often must gain more to
//     be reshaped again; an elastic job whose resizes cost little is
//     discounted little.
//     Keeping the current size is always a candidate step.
//   - Steps may grant up to two nodes' worth of workers at once, so a jump
//     that only pays once it crosses a node boundary is not hidden behind a
//     first step that does not pay yet.
//   - Admission is part of the same greedy: a job's first step is its
//     minimum (a gang).
//   - Placement is pack-aware: a job that fragmentation would spread over
//     more nodes than its size needs gets the size whose actual placement
//     predicts the best rate. Fractional GPUs (Worker.GPUMilli < 1000) are
//     packed onto shared physical GPUs.
//   - Priority: a job with a higher Priority is served before any job with
//     a lower one; the objective orders jobs within a priority.
type Goodput struct {
	// Lookahead bounds how many workers one greedy step may grant; 0 means
	// twice the largest node's GPU count.
	Lookahead int
	// oracle marks the variant registered as "goodput-oracle": the same
	// algorithm, fed by its caller with exact remaining work (class oracle).
	oracle bool
}

// NewGoodput returns the goodput policy (class online: its caller must
// estimate Remaining from what the job has shown).
func NewGoodput() *Goodput { return &Goodput{} }

// NewGoodputOracle returns the same algorithm registered as
// "goodput-oracle", class oracle: its caller gives it exact remaining work.
func NewGoodputOracle() *Goodput { return &Goodput{oracle: true} }

// Name implements Policy.
func (g *Goodput) Name() string {
	if g.oracle {
		return "goodput-oracle"
	}
	return "goodput"
}

// Info implements Policy.
func (g *Goodput) Info() Info {
	tr := Traits{AdaptiveBatch: true, UsesRemaining: true, KindPriors: !g.oracle}
	if g.oracle {
		return Info{Name: g.Name(), Class: ClassOracle, Traits: tr,
			Summary: "goodput's greedy fed exact remaining work and per-kind pooled speed profiles (ablation bound, not deployable)"}
	}
	return Info{Name: g.Name(), Class: ClassOnline, Traits: tr,
		Summary: "heSRPT-weighted goodput greedy on remaining work estimated from observed progress"}
}

type goodputRound struct {
	in     Input
	cap    totals
	free   totals
	gpn    int
	look   int
	sizes  []size
	weight []float64 // heSRPT weight / fair-share rate, per job
	t1     []float64 // predicted remaining seconds at the fair share
	// valueOf, when set, replaces the heSRPT-weighted rate as the value of
	// job i at w workers and ps parameter servers (Pollux's objective).
	valueOf func(i, w, ps int) float64
}

// effRate is the job's predicted progress rate with w workers and ps
// parameter servers, net of the restart the shape change would cost.
func (g *goodputRound) effRate(j *Job, w, ps int) float64 {
	if w <= 0 {
		return 0
	}
	r := j.rate(w, ps, nodesFor(w, j.Worker, g.gpn))
	if r <= 0 {
		return 0
	}
	if j.Speed == nil {
		// No model yet: rate and remaining are placeholders (w and 1), so
		// a restart cost in seconds has no common unit with them. Such jobs
		// rank as the shortest and run first, which is how they get measured.
		return r
	}
	switch {
	case sameShape(j, w, ps):
	case j.Current.Workers == 0:
		// Starting (or resuming) costs one restart before any progress.
		r = j.remaining() / (j.remaining()/r + j.restartCost())
	case j.Age <= 0:
		// So does reshaping a job whose age is unknown, at its resize cost.
		r = j.remaining() / (j.remaining()/r + j.ResizeCostSeconds())
	default:
		rc, age := j.ResizeCostSeconds(), j.Age.Seconds()
		r *= math.Max(age-float64(j.Restarts)*rc, 0) / (age + rc)
	}
	return r
}

func (g *goodputRound) value(i, w, ps int) float64 {
	if g.valueOf != nil {
		return g.valueOf(i, w, ps)
	}
	return g.weight[i] * g.effRate(&g.in.Jobs[i], w, ps)
}

func (g *goodputRound) best(i, rank int) *step {
	j := &g.in.Jobs[i]
	s := g.sizes[i]
	out := &step{job: i, rank: rank, prio: j.Priority}
	base := g.value(i, s.w, s.ps)
	wshare := g.cap.share(j.Worker)
	consider := func(b, ps int) {
		d := b - s.w
		if d <= 0 || b > j.maxWorkers() || !g.free.fits(j.Worker, d) || !g.free.fits(j.PSDem, ps-s.ps) {
			return
		}
		gain := (g.value(i, b, ps) - base) / (float64(d)*wshare + float64(ps-s.ps)*g.cap.psShare(j))
		if gain > 0 && (!out.valid || gain > out.gain) {
			*out = step{job: i, dw: d, dps: ps - s.ps, gain: gain, rank: rank, prio: j.Priority, what: "worker", valid: true}
		}
	}
	lo, ps := s.w+1, s.ps
	if s.w == 0 {
		lo, ps = j.minWorkers(), j.MinPS
	}
	for b := lo; b < lo+g.look; b++ {
		consider(b, ps)
	}
	if c := j.Current.Workers; c >= lo+g.look && j.Current.PS >= ps {
		consider(c, j.Current.PS)
	}
	if s.w > 0 && s.ps < j.MaxPS && g.free.fits(j.PSDem, 1) {
		gain := (g.value(i, s.w, s.ps+1) - base) / g.cap.psShare(j)
		if gain > 0 && (!out.valid || gain > out.gain) {
			*out = step{job: i, dps: 1, gain: gain, rank: rank, prio: j.Priority, what: "parameter server", valid: true}
		}
	}
	return out
}

// fairWorkers is the job's fair share of the cluster's GPUs (an equal
// split among the round's jobs), clamped to its minimum and maximum.
func (g *goodputRound) fairWorkers(j *Job) int {
	w := j.minWorkers()
	if n := int64(len(g.in.Jobs)); j.Worker.GPUMilli > 0 && n > 0 {
		w = max(w, int(g.cap.gpu/n/int64(j.Worker.GPUMilli)))
	}
	return min(w, j.maxWorkers())
}

// weights ranks jobs by predicted remaining time at their fair share
// (longest first) and sets heSRPT's weight c_i = sqrt(2i-1), divided by the
// job's rate at its fair share so that c multiplies a speedup over the fair
// share (Pollux's normalisation). The fair share, not the minimum, is the
// reference because a job's rate at its minimum says little about its size
// when it scales well (or, on one GPU, needs gradient accumulation), and
// heSRPT's ranking compares jobs by how long they would keep the cluster busy.
func (g *goodputRound) weights() {
	n := len(g.in.Jobs)
	g.weight = make([]float64, n)
	g.t1 = make([]float64, n)
	r1 := make([]float64, n)
	idx := make([]int, n)
	for i := range g.in.Jobs {
		j := &g.in.Jobs[i]
		ref := g.fairWorkers(j)
		r1[i] = j.rate(ref, j.MinPS, nodesFor(ref, j.Worker, g.gpn))
		g.t1[i] = math.Inf(1)
		if r1[i] > 0 {
			g.t1[i] = j.remaining() / r1[i]
		}
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return g.t1[idx[a]] > g.t1[idx[b]] })
	for pos, i := range idx {
		if r1[i] > 0 {
			g.weight[i] = math.Sqrt(float64(2*pos+1)) / r1[i]
		}
	}
}

func (g *goodputRound) describeQueued(s *size) string {
	return "queued: jobs predicted to finish sooner come first"
}

// Allocate implements Policy.
func (gp *Goodput) Allocate(in Input) (Plan, error) {
	if err := Validate(in); err != nil {
		return Plan{}, err
	}
	gpn := maxGPUsPerNode(in.Cluster)
	g := &goodputRound{in: in, cap: clusterTotals(in.Cluster), gpn: gpn, look: gp.Lookahead}
	g.free = g.cap
	if g.look <= 0 {
		g.look = 2 * gpn
	}
	g.sizes = make([]size, len(in.Jobs))
	g.weights()
	order := fifoOrder(in.Jobs)
	h := make(stepHeap, 0, len(order))
	for r, i := range order {
		g.sizes[i].describe = g.describeQueued
		if st := g.best(i, r); st.valid {
			heap.Push(&h, st)
		}
	}
	grantByGain(&h, in.Jobs, &g.free, g.sizes, g.best, func(s *size) string {
		j := &in.Jobs[s.last.job]
		left := math.Inf(1)
		if r := j.rate(s.w, s.ps, nodesFor(s.w, j.Worker, gpn)); r > 0 {
			left = j.remaining() / r
		}
		return fmt.Sprintf("goodput: %d workers, %d ps, predicted %.0f s left; last step +%d %s gained %.3g weighted speedup per dominant share",
			s.w, s.ps, left, max(s.last.dw, s.last.dps), s.last.what, s.last.gain)
	})
	return finishOpts(gp.Name(), in, g.sizes, order, true), nil
}
