// Package jobtime reads when a Nomad job was submitted and when it finished
// from records that survive its re-registrations. A job's SubmitTime moves
// to its newest version, and every scale (a planner decision) makes a new
// version; Nomad keeps only the last few (6 by default), so version 0 and
// its submit time are gone after a few scales. The evaluation Nomad created
// with the first registration and the allocations' own times stay until
// Nomad garbage-collects them (hours for a finished batch job).
package jobtime

import (
	"fmt"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// Record is what Nomad holds about one job's times.
type Record struct {
	Job      *nomadapi.Job
	Versions []*nomadapi.Job
	Evals    []*nomadapi.Evaluation
	Allocs   []*nomadapi.AllocationListStub
}

// Read fetches a job's record from Nomad.
func Read(c *nomadapi.Client, jobID string, q *nomadapi.QueryOptions) (Record, error) {
	var r Record
	var err error
	if r.Job, _, err = c.Jobs().Info(jobID, q); err != nil {
		return r, fmt.Errorf("job %s: %w", jobID, err)
	}
	if r.Versions, _, _, err = c.Jobs().Versions(jobID, false, q); err != nil {
		return r, fmt.Errorf("versions of %s: %w", jobID, err)
	}
	if r.Evals, _, err = c.Jobs().Evaluations(jobID, q); err != nil {
		return r, fmt.Errorf("evaluations of %s: %w", jobID, err)
	}
	if r.Allocs, _, err = c.Jobs().Allocations(jobID, true, q); err != nil {
		return r, fmt.Errorf("allocations of %s: %w", jobID, err)
	}
	return r, nil
}

// Submitted is the job's first submission: the earliest of version 0's
// submit time (while Nomad still keeps it), the earliest evaluation's and
// the earliest allocation's creation, counting only records of this
// incarnation of the job (created at or after its create index: a purged
// and resubmitted job's old allocations do not count). Zero when Nomad
// holds none of them.
func (r Record) Submitted() time.Time {
	var created uint64
	if r.Job != nil && r.Job.CreateIndex != nil {
		created = *r.Job.CreateIndex
	}
	var first time.Time
	earliest := func(nanos int64) {
		if t := time.Unix(0, nanos); nanos > 0 && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	for _, v := range r.Versions {
		if v.Version != nil && *v.Version == 0 && v.SubmitTime != nil {
			earliest(*v.SubmitTime)
		}
	}
	for _, e := range r.Evals {
		if e.CreateIndex >= created {
			earliest(e.CreateTime)
		}
	}
	for _, a := range r.Allocs {
		if a.CreateIndex >= created {
			earliest(a.CreateTime)
		}
	}
	if first.IsZero() && r.Job != nil && r.Job.SubmitTime != nil {
		earliest(*r.Job.SubmitTime) // the newest version's: an upper bound
	}
	return first
}

// Finished is when the job's last task ended: the latest FinishedAt of
// this incarnation's allocations' tasks. Zero while none has ended.
func (r Record) Finished() time.Time {
	var created uint64
	if r.Job != nil && r.Job.CreateIndex != nil {
		created = *r.Job.CreateIndex
	}
	var last time.Time
	for _, a := range r.Allocs {
		if a.CreateIndex < created {
			continue
		}
		for _, ts := range a.TaskStates {
			if ts != nil && ts.FinishedAt.After(last) {
				last = ts.FinishedAt
			}
		}
	}
	return last
}

// JCT is Finished - Submitted, or zero when either is unknown.
func (r Record) JCT() time.Duration {
	s, f := r.Submitted(), r.Finished()
	if s.IsZero() || f.IsZero() || f.Before(s) {
		return 0
	}
	return f.Sub(s)
}
