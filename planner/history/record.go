package history

import (
	"time"

	"github.com/caravan-nomad/caravan/planner/policy"
)

// Record is what a job has shown so far: observed facts only, no oracle
// knowledge (no remaining work, no trace).
type Record struct {
	ID, Kind  string
	Submitted time.Time // arrival
	Now       time.Time // when the record was taken
	// Attained is GPU-seconds held so far (policy.Job.AttainedService):
	// seconds times GPUs (MilliGPU/1000 each) over every stretch the job
	// held an allocation, restarts' lost time included.
	Attained float64
	// Restarts counts the times the job was (re)started on a changed
	// allocation after its first start: a reshape, a move, a resume after a
	// suspension, an allocation replaced, a task restarted in place.
	Restarts    int
	Current     policy.Allocation
	RestartCost time.Duration
}

// Job is the record as a policy sees it: the history fields of a
// policy.Job. Callers add what is not history (bounds, demand, speed).
func (r Record) Job() policy.Job {
	age := r.Now.Sub(r.Submitted)
	if age < 0 || r.Submitted.IsZero() {
		age = 0
	}
	return policy.Job{
		ID:              r.ID,
		Kind:            r.Kind,
		Submitted:       r.Submitted,
		Current:         r.Current,
		AttainedService: r.Attained,
		RestartCost:     r.RestartCost,
		Age:             age,
		Restarts:        max(r.Restarts, 0),
	}
}
