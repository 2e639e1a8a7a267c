package manager

import (
	"fmt"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/queue"
)

// queueRound asks the team queues (Settings.Queues) which candidates may
// run and with how many GPUs at most. Without queues it returns nil: the
// round is one pool, as before queues.
func (b *roundBuilder) queueRound() (*queue.Round, error) {
	if !b.s.Queues.Enabled() {
		return nil, nil
	}
	capacity := 0
	for _, n := range b.r.Capacity.Nodes {
		capacity += n.GPUs * policy.MilliGPU
	}
	jobs := make([]queue.Job, len(b.cands))
	pjs := make([]policy.Job, len(b.cands))
	for i, c := range b.cands {
		pjs[i] = c.pj
		qj := queue.FromPolicy(&c.pj, c.job.Key.Namespace, c.job.Job.Meta[queue.MetaKey])
		qj.Priority = nomadPriority(c)
		qj.NoPreempt = !c.job.Spec.Suspendable
		if !c.mm.lastResume.IsZero() {
			qj.SinceResume = b.now.Sub(c.mm.lastResume)
		}
		jobs[i] = qj
	}
	queue.SetRanks(b.pol, policy.Input{Now: b.now, Cluster: b.r.Capacity, Jobs: pjs}, jobs)
	r, err := queue.Decide(b.s.Queues, capacity, jobs)
	if err != nil {
		return nil, fmt.Errorf("queues: %w", err)
	}
	b.r.Queues = r.Queues
	for i := range b.cands {
		d := r.Jobs[i]
		b.cands[i].view.Queue = &d
	}
	return &r, nil
}

// overCap reports whether an admitted job holds more GPUs than its queue
// cap (another queue reclaims what it borrowed): the shrink to the cap
// overrides its cooldown, as a suspend does, or the reclaim would wait
// the cooldown out.
func overCap(j *policy.Job, d queue.Decision) bool {
	_, _, held := queue.Demand(j)
	return d.Admit && held > d.Cap
}

// nomadPriority is the job's Nomad priority (50 when unset).
func nomadPriority(c cand) int {
	if c.job.Job.Priority != nil {
		return *c.job.Job.Priority
	}
	return 50
}

// queueAllocate runs the policy on the jobs the queues admitted, each
// capped by its queue, and spreads the plan back over every job of in
// (queue.Allocate, the code every simulator engine runs).
func queueAllocate(pol policy.Policy, in policy.Input, qr *queue.Round) (policy.Plan, error) {
	return queue.Allocate(pol, in, *qr)
}
