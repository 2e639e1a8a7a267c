package ui

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/manager"
)

// TestPlanPage_ShowsPacking: the plan page shows each GPU, who shares it
// with their rates, the measured combined gain, this round's judgement and
// the last unpack with its reason, escaped.
func TestPlanPage_ShowsPacking(t *testing.T) {
	s, _ := fixture(t, "")
	gain, solo, packed, ratio := 0.91, 100.0, 45.0, 0.45
	s.Planner.(*fakePlanner).round.Packing = &manager.PackingView{Enabled: true, UnpackBelow: 1, MinRatio: 0.7, GPUs: []manager.GPUView{
		{ID: "GPU-0", Node: "client1", Shares: 4, Used: 4, Gain: &gain,
			Jobs:      []manager.GPUJob{{Job: "default/a", Shares: 2, Solo: &solo, Packed: &packed, Ratio: &ratio}, {Job: "default/" + evil, Shares: 2, Never: true}},
			Judgement: "unpack " + evil,
			Last:      &manager.PackDecision{Time: time.Now(), Kind: "migrate", Job: "default/b", Status: manager.PackApplied, Reason: "measured combined gain 0.91 < 1.00"}},
		{ID: "GPU-1", Node: "client1", MPS: true, Shares: 4, Jobs: []manager.GPUJob{}},
	}}
	b := body(t, get(t, s.Handler(), "/ui/plan", nil))
	must.StrContains(t, b, "Live packing is <b>on</b>")
	must.StrContains(t, b, `data-gpu="GPU-0"`)
	must.StrContains(t, b, "(2: 100 → 45.00, 0.45)")
	must.StrContains(t, b, "4 / 4")
	must.StrContains(t, b, "<b>migrate</b> default/b (applied): measured combined gain 0.91 &lt; 1.00")
	must.StrContains(t, b, "MPS")
	must.StrContains(t, b, "idle")
	must.StrNotContains(t, b, "<script>")
}
