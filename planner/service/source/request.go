package source

import (
	"time"

	"github.com/caravan-nomad/caravan/planner/history"
	"github.com/caravan-nomad/caravan/planner/policy"
)

// Request is what a live job asks of the policy (history.Request): its
// requested size is its maximum worker count (what it asks for when GPUs
// are free; a FixedSize policy runs it at exactly that), its bounds the
// meta's or scaling block's, and gpuMilli per worker.
func (s Spec) Request(gpuMilli int) history.Request {
	return history.Request{
		Requested: s.MaxWorkers, Min: s.MinWorkers, Max: s.MaxWorkers, Gang: s.Gang,
		Worker:     policy.Demand{GPUMilli: gpuMilli},
		ResizeCost: time.Duration(s.ResizeCostSeconds * float64(time.Second)),
	}
}
