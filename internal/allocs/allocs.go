// Package allocs holds what caravan's Nomad clients (the planner, the demo,
// the testbed, the e2e harness) need to read a job's allocations right on
// every agent they support.
package allocs

import nomadapi "github.com/hashicorp/nomad/api"

// Current leaves out the allocations created before job's current
// registration. Nomad 1.6 keeps listing a purged job's allocations under
// its ID until its garbage collection, so a job submitted again under that
// ID would otherwise count the first one's (their completions read as its
// training finished). A job without a create index keeps them all.
func Current(job *nomadapi.Job, as []*nomadapi.AllocationListStub) []*nomadapi.AllocationListStub {
	if job == nil || job.CreateIndex == nil {
		return as
	}
	var out []*nomadapi.AllocationListStub
	for _, a := range as {
		if a.CreateIndex >= *job.CreateIndex {
			out = append(out, a)
		}
	}
	return out
}
