package pollux

import (
	"testing"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/simulator/enginetest"
)

// TestPolicyJobMatchesTheLivePlanner: for every registered policy, the
// Pollux replay's declared view of enginetest's history (a job asking for
// 4 workers, batch 128 over a smallest per-GPU batch of 32) agrees with the
// live manager's (enginetest.Check): under FixedSize (fifo, tiresias)
// exactly 4, all or nothing. (TestLiveAndSimulatorHandThePolicyTheSameHistory
// plays a history through the replay's own accounting.)
func TestPolicyJobMatchesTheLivePlanner(t *testing.T) {
	const workers = 3
	for _, info := range policy.Infos() {
		t.Run(info.Name, func(t *testing.T) {
			d := declared{replicas: enginetest.Requested, batch: 128, observed: observed{
				name: "job-1", kind: "job-1", submitted: enginetest.Submitted, now: enginetest.Now,
				attained: enginetest.Attained(workers), restarts: enginetest.Restarts,
				current: policy.Allocation{Workers: workers}, limits: batchLimits{MinLocalBsz: 32}}}
			enginetest.Check(t, info, workers, declaredJob(info.Traits, &d))
		})
	}
}
