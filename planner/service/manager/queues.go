package manager

import (
	"fmt"
	"slices"
	"strings"
	"time"

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
	jobs := make([]queue.Job, len(b.cands))
	pjs := make([]policy.Job, len(b.cands))
	for i, c := range b.cands {
		pjs[i] = c.pj
		// The view the simulator's engines build too; lastResume is
		// zero while the job holds nothing.
		qj := queue.View(&c.pj, c.job.Key.Namespace, c.job.Job.Meta[queue.MetaKey], b.now, c.mm.lastResume)
		qj.Priority = nomadPriority(c)
		qj.NoPreempt = !c.job.Spec.Suspendable
		if unplacedNewcomer(c) {
			// Submitted with workers Nomad could not place: it holds
			// nothing and waits, so the queues admit it (reclaiming
			// borrowed GPUs for it) or hold it, instead of counting
			// it as running ahead of jobs that do run.
			qj.Held = 0
		}
		if at := durableSince(c.job, time.Time{}); !at.IsZero() {
			qj.SinceCheckpoint, qj.CheckpointKnown = max(b.now.Sub(at), 0), true
		}
		if lost := qj.ProgressLost(); lost > 0 {
			c.view.SinceCheckpoint = lost.Round(time.Second).Seconds()
		}
		jobs[i] = qj
	}
	queue.SetRanks(b.pol, policy.Input{Now: b.now, Cluster: b.r.Capacity, Jobs: pjs}, jobs)
	r, err := queue.Decide(b.s.Queues, queue.Capacity(b.r.Capacity), jobs)
	if err != nil {
		return nil, fmt.Errorf("queues: %w", err)
	}
	b.r.Queues = r.Queues
	b.r.QueueGuarantees = &r.Guarantees
	b.gaining = gaining(jobs, r)
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

// gaining names the queues that may use more GPUs this round than their
// jobs hold now: those a borrower's shrink to its cap gives GPUs back to
// (queue.Decide names the asker only for the borrowers it suspends).
func gaining(jobs []queue.Job, r queue.Round) []string {
	held := map[string]int{}
	for i, j := range jobs {
		held[r.Jobs[i].Queue] += j.Held
	}
	var out []string
	for _, q := range r.Queues {
		if q.Used > held[q.Name] {
			out = append(out, q.Name)
		}
	}
	return out
}

// reclaimedBy is the queue (or queues, comma-separated) a change of job c
// from->to gives GPUs back to, "" when it is no reclaim: the queue the
// suspend was decided for, or, for a shrink to the queue cap, the other
// queues that gain GPUs this round.
func (b *roundBuilder) reclaimedBy(c cand, from, to int) string {
	d := c.view.Queue
	if d == nil || to >= from {
		return ""
	}
	if d.ReclaimFor != "" {
		return d.ReclaimFor
	}
	if !d.Admit || !overCap(&c.pj, *d) {
		return ""
	}
	others := slices.DeleteFunc(slices.Clone(b.gaining), func(q string) bool { return q == d.Queue })
	return strings.Join(others, ",")
}

// unplacedNewcomer reports whether c was submitted with workers (not by
// the planner: no scaling event of its own) none of which Nomad has
// placed.
func unplacedNewcomer(c cand) bool {
	if c.pj.Current.Workers == 0 || c.mm.lastOurs != nil {
		return false
	}
	placed, _ := placedAllocs(c.job, c.job.Spec.WorkerGroup)
	return placed == 0
}

// logGuarantees logs when the guarantees in force start to differ from
// the configured ones (a node lost), change, or fit again: once per
// change, not every round. It runs under m.mu with the previous round.
func (m *Manager) logGuarantees(prev, r *Round) {
	var was, now queue.Guarantees
	if prev != nil && prev.QueueGuarantees != nil {
		was = *prev.QueueGuarantees
	}
	if r.QueueGuarantees == nil {
		return
	}
	now = *r.QueueGuarantees
	switch {
	case now.Scaled() && (was.Shortfall != now.Shortfall || was.Capacity != now.Capacity):
		m.log.Warn("queue guarantees scaled to the live cluster", "configured_gpus", inGPUs(now.Configured),
			"capacity_gpus", inGPUs(now.Capacity), "shortfall_gpus", inGPUs(now.Shortfall), "why", now.Note)
	case !now.Scaled() && was.Scaled():
		m.log.Info("queue guarantees fit the live cluster again", "configured_gpus", inGPUs(now.Configured),
			"capacity_gpus", inGPUs(now.Capacity))
	}
}

// inGPUs is a milli-GPU amount in GPUs, for logs.
func inGPUs(m int) float64 { return float64(m) / policy.MilliGPU }
