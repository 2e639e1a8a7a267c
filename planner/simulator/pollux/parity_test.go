package pollux

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/policy"
)

// TestFixedSizeJobIsAllOrNothing: under FixedSize (fifo, tiresias) the
// Pollux replay's declared view of a job asking for 4 workers is exactly 4,
// all or nothing, as the live planner's and the step engine's are
// (steps.TestLiveAndSimulatorBuildTheSamePolicyJob).
func TestFixedSizeJobIsAllOrNothing(t *testing.T) {
	const requested = 4
	for _, info := range policy.Infos() {
		if !info.Traits.FixedSize {
			continue
		}
		t.Run(info.Name, func(t *testing.T) {
			d := declared{replicas: requested, batch: 128, observed: observed{limits: batchLimits{MinLocalBsz: 32}}}
			pj := declaredJob(info.Traits, &d)
			must.Eq(t, [3]any{requested, requested, true}, [3]any{pj.Min, pj.Max, pj.Gang})
		})
	}
}
