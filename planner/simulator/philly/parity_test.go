package philly

import (
	"testing"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/simulator/enginetest"
)

// TestPolicyJobMatchesTheLivePlanner: for every registered policy, the
// Philly replay's job (phillyPolicyJob, which ReplayPhillyQueues builds
// its fifo jobs with too) for enginetest's history agrees with the live
// manager's (enginetest.Check): under FixedSize (fifo, tiresias) exactly
// its requested 4 GPUs, all or nothing.
func TestPolicyJobMatchesTheLivePlanner(t *testing.T) {
	const workers = 3
	for _, info := range policy.Infos() {
		t.Run(info.Name, func(t *testing.T) {
			j := &phillyJob{id: "job-1", gpus: enginetest.Requested, submit: enginetest.Submitted,
				attained: enginetest.Attained(workers), restarts: enginetest.Restarts, w: workers}
			enginetest.Check(t, info, workers, phillyPolicyJob(info, j, enginetest.Now, &residualWork{}))
		})
	}
}
