package manager

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
)

// Under a FixedSize policy (fifo, tiresias) the live planner runs a job at
// exactly its requested size, all or nothing, as the policy's traits say
// and as the simulator does: a job asking for 4 workers gets 4, never
// measured or not. Before, the live job builder read only AdaptiveBatch:
// the exploration cap (twice the largest measured size) held a never
// measured job at 1 worker under fifo, which the simulator never did.
func TestManager_FixedSizePolicyRunsTheRequestedSize(t *testing.T) {
	for _, pol := range []string{"fifo", "tiresias"} {
		t.Run(pol, func(t *testing.T) {
			s := defaultSettings()
			s.Policy.Name = pol
			h := newHarness(t, s, 2)
			h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "4"}))
			r := h.round()
			must.SliceLen(t, 1, r.Actions, must.Sprint(r.Candidates))
			must.Eq(t, 4, r.Actions[0].To)
			must.Eq(t, 4, count(t, h.nomad, "a"))
		})
	}
}
