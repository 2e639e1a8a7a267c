package philly

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/policy"
)

// TestFixedSizeJobIsAllOrNothing: under FixedSize (fifo, tiresias) the
// Philly replay sizes a job of 4 GPUs at exactly 4 workers, all or nothing,
// as the live planner and the step engine do
// (steps.TestLiveAndSimulatorBuildTheSamePolicyJob).
func TestFixedSizeJobIsAllOrNothing(t *testing.T) {
	const requested = 4
	for _, info := range policy.Infos() {
		if !info.Traits.FixedSize {
			continue
		}
		t.Run(info.Name, func(t *testing.T) {
			pj := policy.Job{Worker: policy.Demand{GPUMilli: policy.MilliGPU}}
			phillyLimits(info, &phillyJob{gpus: requested}, &pj, &residualWork{})
			must.Eq(t, [3]any{requested, requested, true}, [3]any{pj.Min, pj.Max, pj.Gang})
		})
	}
}
