package manager

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
	"github.com/caravan-nomad/caravan/planner/service/source"
)

// TestManager_GuardsHoldUnderEveryPolicy: live, under goodput two elastic
// jobs swapped all four GPUs every ~19 s: the cooldown pinned a running
// job's size but not its admission, and the suspend quantum only ordered
// the time-slicing queue, which goodput's own ranking ignores. A running
// job inside its cooldown or its quantum keeps running whatever the policy;
// past both, the policy may suspend it (the control case shows it does).
func TestManager_GuardsHoldUnderEveryPolicy(t *testing.T) {
	cases := []struct {
		name                 string
		sinceChange, running time.Duration // a's last change and its current slice
		suspended            bool
	}{
		{"inside cooldown", time.Minute, time.Hour, false},
		{"inside quantum", time.Hour, 5 * time.Minute, false},
		{"past both", time.Hour, time.Hour, true},
	}
	for _, pol := range []string{"goodput", "optimus"} {
		for _, tc := range cases {
			t.Run(pol+"/"+tc.name, func(t *testing.T) {
				s := defaultSettings()
				s.Policy.Name = pol
				h := newHarness(t, s, 2) // 2 GPUs: 4 half-GPU workers
				gang := map[string]string{"caravan_min_workers": "4", "caravan_max_workers": "4", "caravan_gang": "true"}
				a := fakenomad.TrainingJob("a", 4, merge(gang, "caravan_total_steps", "100000"))
				b := fakenomad.TrainingJob("b", 0, merge(gang, "caravan_total_steps", "100"))
				b.SubmitTime = ptr(time.Now().Add(-2 * time.Hour).UnixNano()) // waiting long before a's slice
				h.nomad.PutJob(a)
				h.nomad.PutJob(b)
				h.nomad.SetAllocs(running(map[string]int{"a": 4}))
				deadlineAllocs(t, h, 4)
				h.sync()
				mm := h.mgr.memFor(source.JobKey{Namespace: "default", ID: "a"})
				mm.speed[shape{workers: 4, nodes: 2}] = 1 // 100000 steps left: a long job
				now := h.clk.Now()
				mm.lastChange, mm.lastResume = now.Add(-tc.sinceChange), now.Add(-tc.running)

				r := h.round()
				must.Eq(t, tc.suspended, count(t, h.nomad, "a") == 0, must.Sprintf("actions %+v", r.Actions))
				if !tc.suspended {
					must.Eq(t, 4, count(t, h.nomad, "a"))
					must.Eq(t, 0, count(t, h.nomad, "b"))
				}
			})
		}
	}
}

// TestManager_UnmeasuredJobGrowsByDoubling: live, a job with no speed
// measured yet went from 1 to 4 workers at once on a linear guess. Pollux's
// exploration rule: at most twice the largest measured worker count.
func TestManager_UnmeasuredJobGrowsByDoubling(t *testing.T) {
	cases := []struct {
		measured, most int
	}{
		{0, 1}, // never measured: keeps its one worker until it reports a speed
		{1, 2},
		{2, 4},
	}
	for _, pol := range []string{"goodput", "optimus"} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/measured %d", pol, tc.measured), func(t *testing.T) {
				s := defaultSettings()
				s.Policy.Name = pol
				h := newHarness(t, s, 4) // 4 GPUs: 8 half-GPU workers
				h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "8"}))
				h.nomad.SetAllocs(running(map[string]int{"a": 1}))
				deadlineAllocs(t, h, 1)
				if tc.measured > 0 {
					h.measuredAt("a", tc.measured)
				}
				r := h.round()
				must.Eq(t, tc.most, count(t, h.nomad, "a"), must.Sprintf("actions %+v", r.Actions))
				must.Eq(t, tc.most, findJob(t, r, "a").Plan.Workers)
			})
		}
	}
}

// TestManager_GuardedJobSurvivesRounds: the guard holds round after round
// until the quantum ends; the waiting job then gets its turn.
func TestManager_GuardedJobSurvivesRounds(t *testing.T) {
	s := defaultSettings()
	s.Policy.Name = "goodput"
	h := newHarness(t, s, 2)
	gang := map[string]string{"caravan_min_workers": "4", "caravan_max_workers": "4", "caravan_gang": "true"}
	h.nomad.PutJob(fakenomad.TrainingJob("a", 4, merge(gang, "caravan_total_steps", "100000")))
	h.nomad.PutJob(fakenomad.TrainingJob("b", 0, merge(gang, "caravan_total_steps", "100")))
	h.nomad.SetAllocs(running(map[string]int{"a": 4}))
	deadlineAllocs(t, h, 4)
	h.sync()
	mm := h.mgr.memFor(source.JobKey{Namespace: "default", ID: "a"})
	mm.speed[shape{workers: 4, nodes: 2}] = 1
	mm.lastChange, mm.lastResume = h.clk.Now().Add(-time.Hour), h.clk.Now()
	rounds := 0
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		h.round()
		rounds++
		if count(t, h.nomad, "a") == 0 {
			return true
		}
		h.clk.Advance(s.Interval)
		return false
	}), wait.Attempts(20), wait.Gap(time.Millisecond)))
	// The quantum is ten intervals: a ran all of it, then yielded.
	must.Eq(t, 11, rounds)
	must.Eq(t, 4, count(t, h.nomad, "b"))
}

func merge(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for kk, vv := range m {
		out[kk] = vv
	}
	return out
}
