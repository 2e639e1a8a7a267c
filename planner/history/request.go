package history

import (
	"time"

	"github.com/caravan-nomad/caravan/planner/policy"
)

// Request is what a job asks of a policy besides its history: the worker
// count it was submitted with, the bounds an elastic policy may choose in,
// and what each worker needs.
type Request struct {
	// Requested is the worker count the job asks for: a FixedSize policy
	// runs it at exactly this, all or nothing. 0: not known to the caller's
	// information class (the size is then left to Min and Max).
	Requested int
	// Min and Max bound the workers an elastic policy may give (Min below 1
	// counts as 1); Gang makes Min all or nothing.
	Min, Max int
	Gang     bool
	// Worker is one worker's demand; ResizeCost a declared resize cost
	// (0: the restart cost).
	Worker     policy.Demand
	ResizeCost time.Duration
}

// Apply sets the request's part of pj (bounds, gang, demand, resize cost)
// as the policy's traits say: under FixedSize the job runs at exactly its
// requested size, all or nothing (Min = Max = Requested, Gang). The live
// manager and every simulator engine size their jobs here, so a policy is
// handed the same job live and simulated.
func (r Request) Apply(tr policy.Traits, pj *policy.Job) {
	pj.Min, pj.Max, pj.Gang = max(r.Min, 1), r.Max, r.Gang
	pj.Worker, pj.ResizeCost = r.Worker, r.ResizeCost
	if tr.FixedSize && r.Requested > 0 {
		pj.Min, pj.Max, pj.Gang = r.Requested, r.Requested, true
	}
}

// Explores reports whether a driver may cap the job's Max by an
// exploration rule (policy.ExploreMax): not when the traits fix its size.
func Explores(tr policy.Traits) bool { return !tr.FixedSize }

// PolicyJob is the job as a policy sees it: the record's history (Job) and
// the request, sized by the policy's traits (Request.Apply). Callers add
// what neither holds (speed, remaining work, placement, queue key).
func (r Record) PolicyJob(tr policy.Traits, req Request) policy.Job {
	pj := r.Job()
	req.Apply(tr, &pj)
	return pj
}
