package packsim

import (
	"testing"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/simulator/enginetest"
)

// TestPolicyJobMatchesTheLivePlanner: the packing replay's job (every one
// of its policies runs a job at its declared workers, all or nothing, as a
// FixedSize policy does) for enginetest's history, running on whole GPUs,
// agrees with the live manager's under fifo (enginetest.Check).
func TestPolicyJobMatchesTheLivePlanner(t *testing.T) {
	const workers = enginetest.Requested
	s := &sim{cfg: Config{Shares: 4}}
	j := &job{spec: &Spec{ID: "job-1", Kind: "job-1", Submit: enginetest.Submitted, Workers: workers}, shares: 4,
		gpus: make([]int, workers), attained: enginetest.Attained(workers), restarts: enginetest.Restarts}
	enginetest.Check(t, policy.NewFIFO().Info(), workers, s.policyJob(j, enginetest.Now))
}
