package manager

import (
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

func actionOf(t *testing.T, r *Round, job string) Action {
	t.Helper()
	for _, a := range r.Actions {
		if a.Job == job {
			return a
		}
	}
	t.Fatalf("no action for %s in %+v", job, r.Actions)
	return Action{}
}

func candidateOf(t *testing.T, r *Round, job string) Candidate {
	t.Helper()
	for _, c := range r.Candidates {
		if c.Job == job {
			return c
		}
	}
	t.Fatalf("no candidate %s in %+v", job, r.Candidates)
	return Candidate{}
}

// TestManager_GangStartCheckedWithNomadPlan: with queues, the start of a
// held gang is dry-run with Nomad's plan first; a plan with unplaced
// allocations keeps it at zero (verdict no-fit, the reason on the
// action, the candidate and the job), a plan that fits is written.
func TestManager_GangStartCheckedWithNomadPlan(t *testing.T) {
	s := defaultSettings()
	s.Queues = twoTeamQueues()
	h := newHarness(t, s, 2) // 2 GPUs: 4 half-GPU workers
	h.nomad.PutJob(fakenomad.TrainingJob("a", 0, gangMeta("2", nil)))
	h.nomad.SetPlanFailures("default", "a", map[string]*nomadapi.AllocationMetric{
		"worker": {NodesEvaluated: 2, NodesExhausted: 2, CoalescedFailures: 1, DimensionExhausted: map[string]int{"devices: gpu": 2}},
	})

	r := h.round()
	a := actionOf(t, r, "default/a")
	must.Eq(t, KindStart, a.Kind)
	must.Eq(t, StatusDeferred, a.Status)
	must.StrContains(t, a.Error, "held at 0: Nomad's plan cannot place all 2 workers at once")
	must.StrContains(t, a.Error, "group worker: 2 allocation(s) unplaced (devices: gpu exhausted on 2 node(s)); 2 of 2 nodes exhausted")
	c := candidateOf(t, r, "default/a")
	must.Eq(t, VerdictNoFit, c.Verdict)
	must.StrContains(t, c.Detail, "Nomad's plan cannot place")
	must.StrContains(t, findJob(t, r, "a").Detail, "Nomad's plan cannot place")
	must.Eq(t, 0, count(t, h.nomad, "a"))
	must.Eq(t, []string{"plan default/a worker=2"}, h.nomad.PlansSnapshot())
	must.SliceEmpty(t, h.nomad.WritesSnapshot())

	// Room appears: the plan fits and the start is written.
	h.nomad.SetPlanFailures("default", "a", nil)
	r = h.round()
	must.Eq(t, StatusApplied, actionOf(t, r, "default/a").Status)
	must.Eq(t, VerdictApplied, candidateOf(t, r, "default/a").Verdict)
	must.Eq(t, 2, count(t, h.nomad, "a"))
	must.Eq(t, []string{"scale default/a worker 2"}, h.nomad.WritesSnapshot())
}

// TestManager_NomadPlanOnlyWithQueues: without queues the round is as
// before them (no dry run); a token that may not plan (403) does not
// block starts: they are written unchecked, and the action says so.
func TestManager_NomadPlanOnlyWithQueues(t *testing.T) {
	h := newHarness(t, defaultSettings(), 2)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 0, gangMeta("2", nil)))
	h.nomad.SetPlanFailures("default", "a", map[string]*nomadapi.AllocationMetric{"worker": {}})
	r := h.round()
	must.Eq(t, StatusApplied, actionOf(t, r, "default/a").Status)
	must.SliceEmpty(t, h.nomad.PlansSnapshot())

	s := defaultSettings()
	s.Queues = twoTeamQueues()
	h = newHarness(t, s, 2)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 0, gangMeta("2", nil)))
	h.nomad.SetPlanStatus(403)
	r = h.round()
	a := actionOf(t, r, "default/a")
	must.Eq(t, StatusApplied, a.Status)
	must.StrContains(t, a.Error, "fit not checked")
	must.StrContains(t, a.Error, submit.CapabilityPlan)
	must.Eq(t, 2, count(t, h.nomad, "a"))
}

// TestManager_PartlyPlacedGangRolledBack: a gang Nomad placed only in
// part (2 of 4 workers hold GPUs, 2 unplaced) is left alone for one
// round, then scaled back to zero with a scaling event that says why;
// it then waits as a suspended job. A whole gang, and a non-gang job
// placed in part, are never rolled back.
func TestManager_PartlyPlacedGangRolledBack(t *testing.T) {
	s := defaultSettings()
	s.Queues = twoTeamQueues()
	h := newHarness(t, s, 3) // 6 half-GPU workers: both jobs fit
	h.nomad.PutJob(fakenomad.TrainingJob("b", 4, gangMeta("4", nil)))
	h.nomad.PutJob(fakenomad.TrainingJob("c", 2, map[string]string{"caravan_min_workers": "2", "caravan_max_workers": "2"}))
	allocs := running(map[string]int{"b": 1, "c": 1})
	allocs = append(allocs, &nomadapi.AllocationListStub{ID: "b-p", Namespace: "default", JobID: "b",
		TaskGroup: "worker", NodeID: "node-1", ClientStatus: "pending", DesiredStatus: "run"})
	h.nomad.SetAllocs(allocs)

	r := h.round()
	for _, a := range r.Actions {
		must.NotEq(t, KindGangRollback, a.Kind, must.Sprintf("%+v", r.Actions))
	}
	must.StrContains(t, findJob(t, r, "b").Detail, "gang partly placed: 2 of 4 workers placed")
	must.Eq(t, 4, count(t, h.nomad, "b"))

	h.clk.Advance(s.Interval)
	r = h.round()
	a := actionOf(t, r, "default/b")
	must.Eq(t, KindGangRollback, a.Kind)
	must.Eq(t, StatusApplied, a.Status)
	must.Eq(t, 0, count(t, h.nomad, "b"))
	must.Eq(t, 2, count(t, h.nomad, "c"))
	evs := h.nomad.Events("default", "b", "worker")
	must.SliceNotEmpty(t, evs)
	last := evs[len(evs)-1]
	must.StrContains(t, last.Message, "gang rolled back 4 -> 0 (Nomad placed only part of it)")
	must.StrContains(t, last.Message, "2 of its 4 workers placed")
	must.Eq(t, any(submit.ActionGangRollback), last.Meta[submit.EventMetaAction])
	for _, w := range h.nomad.WritesSnapshot() {
		must.False(t, strings.HasPrefix(w, "scale default/c"), must.Sprintf("non-gang job written: %v", w))
	}

	h.nomad.SetAllocs(running(map[string]int{"c": 1}))
	r = h.round()
	must.Eq(t, StateSuspended, findJob(t, r, "b").State)
}

// TestManager_GangNotRolledBack: a gang whose minimum is placed whole, or
// some of whose workers of this version ended (finished or failed: not a
// placement race), is left alone, round after round.
func TestManager_GangNotRolledBack(t *testing.T) {
	ended := running(map[string]int{"b": 2})
	for _, st := range []string{"complete", "failed"} {
		ended = append(ended, &nomadapi.AllocationListStub{ID: "b-" + st, Namespace: "default", JobID: "b",
			TaskGroup: "worker", NodeID: "node-1", ClientStatus: st, DesiredStatus: "run"})
	}
	for name, allocs := range map[string][]*nomadapi.AllocationListStub{
		"whole":         running(map[string]int{"b": 4}),
		"workers ended": ended,
	} {
		t.Run(name, func(t *testing.T) {
			s := defaultSettings()
			s.Queues = twoTeamQueues()
			h := newHarness(t, s, 2)
			h.nomad.PutJob(fakenomad.TrainingJob("b", 4, gangMeta("4", nil)))
			h.nomad.SetAllocs(allocs)
			for i := 0; i < 3; i++ {
				r := h.round()
				for _, a := range r.Actions {
					must.NotEq(t, KindGangRollback, a.Kind, must.Sprintf("%+v", a))
				}
				h.clk.Advance(s.Interval)
			}
		})
	}
}
