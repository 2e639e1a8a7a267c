package queue

import (
	"time"

	"github.com/caravan-nomad/caravan/planner/policy"
)

// Demand is a policy job's GPU demand in milli-GPUs: its gang minimum
// (minimum workers and parameter servers), the most it can use, and what
// it holds now.
func Demand(j *policy.Job) (lo, hi, held int) {
	minW := max(j.Min, 1)
	maxW := max(j.Max, minW)
	ps := j.PSDem.GPUMilli
	lo = minW*j.Worker.GPUMilli + j.MinPS*ps
	hi = maxW*j.Worker.GPUMilli + max(j.MaxPS, j.MinPS)*ps
	held = j.Current.Workers*j.Worker.GPUMilli + j.Current.PS*ps
	return lo, hi, held
}

// FromPolicy is the queue view of a policy job in namespace with MetaKey
// value requested; View adds SinceResume, the caller NoPreempt and, when it
// knows the job's last checkpoint, SinceCheckpoint and CheckpointKnown.
func FromPolicy(j *policy.Job, namespace, requested string) Job {
	lo, hi, held := Demand(j)
	return Job{ID: j.ID, Namespace: namespace, Requested: requested, Priority: j.Priority,
		Submitted: j.Submitted, Min: lo, Max: hi, Held: held}
}

// View is the queue view every caller builds (the live manager and the
// simulator's engines): FromPolicy, and for a job that runs (Current
// workers) since resumed (zero: not known) how long it has run, the
// progress a suspension loses when no checkpoint of it is known.
func View(j *policy.Job, namespace, requested string, now, resumed time.Time) Job {
	qj := FromPolicy(j, namespace, requested)
	if j.Current.Workers > 0 && !resumed.IsZero() {
		qj.SinceResume = max(now.Sub(resumed), 0)
	}
	return qj
}

// Constrain applies a round to a policy input: only admitted jobs remain,
// each with its maximum workers cut to what its cap holds (never below its
// minimum). kept maps the returned jobs to their indices in in.Jobs. r
// must be Decide's answer for in.Jobs, in the same order.
func Constrain(in policy.Input, r Round) (out policy.Input, kept []int) {
	out = in
	out.Jobs = make([]policy.Job, 0, len(in.Jobs))
	for i, j := range in.Jobs {
		d := r.Jobs[i]
		if !d.Admit {
			continue
		}
		minW := max(j.Min, 1)
		if g := j.Worker.GPUMilli; g > 0 {
			room := d.Cap - max(j.MaxPS, j.MinPS)*j.PSDem.GPUMilli
			if w := room / g; w < max(j.Max, minW) {
				j.Max = max(w, minW)
			}
		}
		out.Jobs = append(out.Jobs, j)
		kept = append(kept, i)
	}
	return out, kept
}
