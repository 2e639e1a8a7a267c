package policy

import (
	"fmt"
	"slices"
)

// TiresiasQueueThreshold is the attained service (GPU-seconds) after which
// Tiresias demotes a job from the high- to the low-priority queue. The Pollux
// artifact uses 16 GPU-hours and two queues.
const TiresiasQueueThreshold = 16 * 3600.0

// Tiresias is the discretized two-dimensional least-attained-service policy
// (NSDI'19) with two queues, as the Pollux artifact runs it: jobs enter the
// high queue, move to the low queue once their attained service (GPU time)
// crosses the threshold, and each queue is served in the order jobs entered
// it. Every job runs with exactly its requested (maximum) workers or not at
// all; a job that does not fit is skipped (lower jobs may backfill), and a
// running job is preempted when higher-queue jobs need its GPUs.
//
// Tiresias keeps its queues between rounds, so a Tiresias value belongs to
// one scheduling loop.
type Tiresias struct {
	Threshold float64 // GPU-seconds; 0 means TiresiasQueueThreshold
	q0, q1    []string
	inQ       map[string]int // 0 or 1
}

// NewTiresias returns a Tiresias policy with the artifact's threshold.
func NewTiresias() *Tiresias { return &Tiresias{Threshold: TiresiasQueueThreshold} }

// Name implements Policy.
func (*Tiresias) Name() string { return "tiresias" }

// Info implements Policy.
func (t *Tiresias) Info() Info {
	return Info{Name: t.Name(), Class: ClassDeclared, Traits: Traits{FixedSize: true},
		Summary: "discretised 2D-LAS, two queues (16 GPU-hours), requested size or nothing"}
}

// Allocate implements Policy.
func (t *Tiresias) Allocate(in Input) (Plan, error) {
	if err := Validate(in); err != nil {
		return Plan{}, err
	}
	if t.inQ == nil {
		t.inQ = map[string]int{}
	}
	thr := t.Threshold
	if thr <= 0 {
		thr = TiresiasQueueThreshold
	}
	idx := make(map[string]int, len(in.Jobs))
	for i := range in.Jobs {
		idx[in.Jobs[i].ID] = i
	}
	// Forget finished jobs.
	keep := func(q []string) []string {
		return slices.DeleteFunc(q, func(id string) bool {
			if _, ok := idx[id]; !ok {
				delete(t.inQ, id)
				return true
			}
			return false
		})
	}
	t.q0, t.q1 = keep(t.q0), keep(t.q1)
	// New jobs enter the high queue in arrival order.
	for _, i := range fifoOrder(in.Jobs) {
		id := in.Jobs[i].ID
		if _, ok := t.inQ[id]; !ok {
			t.inQ[id] = 0
			t.q0 = append(t.q0, id)
		}
	}
	// Demote jobs whose attained service crossed the threshold.
	var stay []string
	for _, id := range t.q0 {
		if in.Jobs[idx[id]].AttainedService >= thr {
			t.inQ[id] = 1
			t.q1 = append(t.q1, id)
		} else {
			stay = append(stay, id)
		}
	}
	t.q0 = stay
	sizes := make([]size, len(in.Jobs))
	free := clusterTotals(in.Cluster)
	order := make([]int, 0, len(in.Jobs))
	for q, queue := range [][]string{t.q0, t.q1} {
		for pos, id := range queue {
			i := idx[id]
			order = append(order, i)
			j := &in.Jobs[i]
			w, ps := j.maxWorkers(), max(j.MaxPS, j.MinPS)
			if free.fits(j.Worker, w) && free.fits(j.PSDem, ps) {
				free.sub(j.Worker, w)
				free.sub(j.PSDem, ps)
				sizes[i] = size{w: w, ps: ps, reason: fmt.Sprintf("tiresias: queue %d position %d, runs with %d workers", q, pos, w)}
			} else {
				sizes[i].reason = fmt.Sprintf("tiresias: queue %d position %d, waiting for %d workers", q, pos, w)
			}
		}
	}
	return finish(t.Name(), in, sizes, order), nil
}
