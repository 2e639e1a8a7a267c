package policy

import (
	"fmt"
	"math"
	"sort"
)

// Goodput is caravan's best policy. It keeps Optimus's marginal-gain greedy
// but changes what is optimised and in which order:
//
//   - The job's SpeedModel is expected to predict goodput (throughput times
//     statistical efficiency, from the gradient noise the job reports), so a
//     worker that only buys a larger, less efficient batch is worth little.
//   - Restart-cost awareness: a plan that changes a running job's allocation
//     adds the job's RestartCost to its predicted remaining time, so the
//     greedy only reshapes a job when the saving pays for the restart, and a
//     step may grant several workers at once (lookahead) so a worthwhile
//     jump is not hidden behind a first step that does not pay yet.
//   - Admission is shortest-predicted-remaining-time first (at the minimum
//     size, restart cost included for jobs that would have to start), which
//     minimises average completion time when jobs outnumber GPUs; ties by
//     priority and arrival.
//   - Fractional GPUs (Worker.GPUMilli < 1000) are packed onto shared
//     physical GPUs by the placement step.
type Goodput struct {
	// Lookahead bounds how many workers one greedy step may grant; 0 means
	// the largest node's GPU count.
	Lookahead int
}

// NewGoodput returns the goodput policy.
func NewGoodput() *Goodput { return &Goodput{} }

// Name implements Policy.
func (*Goodput) Name() string { return "goodput" }

// Allocate implements Policy.
func (gp *Goodput) Allocate(in Input) (Plan, error) {
	if err := Validate(in); err != nil {
		return Plan{}, err
	}
	gpn := maxGPUsPerNode(in.Cluster)
	g := &greedyCtx{in: in, cap: clusterTotals(in.Cluster), gpn: gpn, lookahead: gp.Lookahead}
	if g.lookahead <= 0 {
		g.lookahead = gpn
	}
	g.remaining = func(j *Job, _ int, w, ps int) float64 {
		r := j.rate(w, ps, nodesFor(w, j.Worker, gpn))
		if r <= 0 {
			return math.Inf(1)
		}
		t := j.remaining() / r
		if !sameShape(j, w, ps) {
			t += j.restartCost()
		}
		return t
	}
	// Admission order: shortest predicted remaining time at the minimum size.
	order := fifoOrder(in.Jobs)
	rank := make([]int, len(in.Jobs))
	for r, i := range order {
		rank[i] = r
	}
	key := make([]float64, len(in.Jobs))
	for i := range in.Jobs {
		j := &in.Jobs[i]
		key[i] = g.remaining(j, i, j.minWorkers(), j.MinPS)
	}
	sort.SliceStable(order, func(a, b int) bool {
		ja, jb := &in.Jobs[order[a]], &in.Jobs[order[b]]
		if ja.Priority != jb.Priority {
			return ja.Priority > jb.Priority
		}
		if key[order[a]] != key[order[b]] {
			return key[order[a]] < key[order[b]]
		}
		return rank[order[a]] < rank[order[b]]
	})
	g.sizes = make([]size, len(in.Jobs))
	g.free = admit(in, order, g.sizes)
	g.run(order)
	for i := range g.sizes {
		s := &g.sizes[i]
		if s.w > 0 && s.gain == 0 {
			s.reason = fmt.Sprintf("admitted (predicted %.0f s left at minimum); more workers would not pay for a restart", key[i])
		}
	}
	return finish(gp.Name(), in, g.sizes, order), nil
}
