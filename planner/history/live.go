package history

import (
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/planner/policy"
)

// Live is a job as the live service reads it from Nomad.
type Live struct {
	ID, Kind string
	Job      *nomadapi.Job
	Allocs   []*nomadapi.AllocationListStub
	Group    string // the worker group
	GPUMilli int    // per worker allocation
	Workers  int    // the worker group's count now
	// RestartCost is the configured cost of one restart.
	RestartCost time.Duration
}

// Record is the live job's history record: its worker group's allocation
// history, submitted at its first submission as far as Nomad remembers
// (every registration, a scale's too, moves the job's SubmitTime; the first
// allocation's creation does not move).
func (l Live) Record(now time.Time) (Record, Allocs) {
	h := FromAllocs(l.Allocs, l.Group, l.GPUMilli)
	submitted := h.First
	if l.Job != nil && l.Job.SubmitTime != nil {
		if t := time.Unix(0, *l.Job.SubmitTime); submitted.IsZero() || t.Before(submitted) {
			submitted = t
		}
	}
	return Record{
		ID: l.ID, Kind: l.Kind, Submitted: submitted, Now: now,
		Attained: h.Attained(now), Restarts: h.Restarts(now),
		Current: policy.Allocation{Workers: l.Workers}, RestartCost: l.RestartCost,
	}, h
}
