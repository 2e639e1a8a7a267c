package manager

import (
	"fmt"
	"time"

	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
	"github.com/caravan-nomad/caravan/planner/service/source"
)

// psJob is the live scenario's job: a ps-sync trainer with one worker and
// one parameter server, up to four of each, declaring 2000 steps, whose
// speed was measured at 1 and 2 workers (one server): 10 and 12 steps/s.
func psJob(t *testing.T, h *harness, maxWorkers string) *memory {
	t.Helper()
	job := fakenomad.TrainingJob("a", 1, map[string]string{
		"caravan_max_workers": maxWorkers, "caravan_ps_group": "ps", "caravan_min_ps": "1", "caravan_max_ps": "4",
		"caravan_speed_model": "ps-sync", "caravan_total_steps": "2000"})
	ps := nomadapi.NewTaskGroup("ps", 1)
	ps.AddTask(nomadapi.NewTask("serve", "raw_exec"))
	job.AddTaskGroup(ps)
	h.nomad.PutJob(job)
	h.nomad.SetAllocs([]*nomadapi.AllocationListStub{
		{ID: "w-0", Namespace: "default", JobID: "a", TaskGroup: "worker", NodeID: "node-0", ClientStatus: "running", DesiredStatus: "run"},
		{ID: "ps-0", Namespace: "default", JobID: "a", TaskGroup: "ps", NodeID: "node-0", ClientStatus: "running", DesiredStatus: "run"},
	})
	deadlineAllocs(t, h, 2)
	h.sync()
	mm := h.mgr.memFor(source.JobKey{Namespace: "default", ID: "a"})
	mm.speed[shape{workers: 1, ps: 1, nodes: 1}] = 10
	mm.speed[shape{workers: 2, ps: 1, nodes: 1}] = 12
	return mm
}

// TestManager_ServersHeldInCooldown: the live planner shrank job eb 2 -> 1
// workers and in the next round scaled its servers 1 -> 4 ("scale workers
// 1 -> 1, parameter servers 1 -> 4"): the cooldown pinned the workers only.
func TestManager_ServersHeldInCooldown(t *testing.T) {
	h := newHarness(t, defaultSettings(), 2)
	mm := psJob(t, h, "4")
	mm.lastChange = h.clk.Now() // just shrunk
	r := h.round()
	must.SliceEmpty(t, r.Actions, must.Sprintf("actions %+v", r.Actions))
	jv := findJob(t, r, "a")
	must.Eq(t, 1, jv.Plan.PS)
	must.StrContains(t, jv.Plan.Reason, "cooldown")
}

// TestManager_ServerChangeMustRepayARestart: with one worker allowed, the
// only move is a server. Measured at one server count, the servers' effect
// is a bounded guess (at most one more server, saving at most the
// worker-proportional cost): here a few seconds, which do not repay a 30 s
// restart, so nothing changes, and the gain shown is in seconds per
// worker-share, not ~1e9.
func TestManager_ServerChangeMustRepayARestart(t *testing.T) {
	h := newHarness(t, defaultSettings(), 2)
	psJob(t, h, "1")
	r := h.round()
	must.SliceEmpty(t, r.Actions, must.Sprintf("actions %+v", r.Actions))
	jv := findJob(t, r, "a")
	must.Eq(t, 1, jv.Plan.PS)
	must.StrContains(t, jv.Plan.Reason, "servers kept at 1")
	must.Less(t, 1e4, jv.Plan.Gain)
	// The model never predicts a measured shape away from its measurement.
	must.Eq(t, 2000/10.0, jv.Predicted[1])
}

// TestManager_NoSpeedWhileScaleInFlight: after the planner scales a job up,
// Nomad's counts say the new size while only the old workers run and report;
// a speed measured then (a transition: workers joining, a re-shard's pause)
// must not be recorded for any shape.
func TestManager_NoSpeedWhileScaleInFlight(t *testing.T) {
	h := newHarness(t, defaultSettings(), 1)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "2"}))
	h.nomad.SetAllocs([]*nomadapi.AllocationListStub{{ID: "alloc-0", Namespace: "default", JobID: "a", TaskGroup: "worker",
		NodeID: "node-0", ClientStatus: "running", DesiredStatus: "run"}})
	deadlineAllocs(t, h, 1)
	k := ingest.JobKey{Namespace: "default", ID: "a"}
	report := func(step int64) {
		h.store.Add(k, ingest.Record{Sample: ingest.Sample{Step: step, Loss: 1, SamplesPerSec: 64, Workers: 1},
			Time: h.clk.Now(), AllocationID: "alloc-0"})
	}
	// Measured with one worker first: the exploration rule lets it grow
	// to two only then.
	report(100)
	r := h.round()
	must.SliceEmpty(t, r.Actions)
	h.clk.Advance(10 * time.Second)
	report(200)
	r = h.round()
	must.Eq(t, 2, r.Actions[0].To) // scaled 1 -> 2; the second worker never starts
	h.clk.Advance(10 * time.Second)
	report(210)
	h.clk.Advance(10 * time.Second)
	report(220)
	fit := findJob(t, h.round(), "a").Fit
	must.SliceLen(t, 1, fit.SpeedSamples, must.Sprintf("samples %+v", fit.SpeedSamples))
	must.Eq(t, 1, fit.SpeedSamples[0].Workers, must.Sprintf("samples %+v", fit.SpeedSamples))
}

// TestManager_ReshapeMustRepayItsResizeCost: live, the planner charged an
// elastic job (new workers join at its next step, nothing restarts) a
// 30 s restart for every resize, so short jobs never grew into idle GPUs.
// A plan that only reshapes running jobs must save what its resizes cost:
// the planner's restart cost by default, the job's caravan_resize_cost
// when it declares one. Optimus alone would go from 3 + 1 to 2 + 2: b's
// second worker saves 50 s, a's third 33 s; in all 17 s for two resizes.
func TestManager_ReshapeMustRepayItsResizeCost(t *testing.T) {
	cases := []struct {
		name     string
		resize   string // caravan_resize_cost, "" for none
		reshaped bool
		held     string // the job held, and why
		reason   string
	}{
		{"restart cost", "", false, "a", "less than the 62 s its 2 resizes cost"},
		{"elastic", "2s", true, "", ""},
		{"declared dear", "1m", false, "b", "saving (50 s) does not repay a 1m0s resize"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, defaultSettings(), 2) // 2 GPUs, 4 half-GPU workers
			meta := func(steps string) map[string]string {
				m := map[string]string{"caravan_max_workers": "4", "caravan_total_steps": steps}
				if tc.resize != "" {
					m["caravan_resize_cost"] = tc.resize
				}
				return m
			}
			h.nomad.PutJob(fakenomad.TrainingJob("a", 3, meta("2000")))
			h.nomad.PutJob(fakenomad.TrainingJob("b", 1, meta("1000")))
			h.nomad.SetAllocs(running(map[string]int{"a": 3, "b": 1}))
			deadlineAllocs(t, h, 3)
			h.sync()
			for _, id := range []string{"a", "b"} {
				mm := h.mgr.memFor(source.JobKey{Namespace: "default", ID: id})
				mm.speed[shape{workers: 1, nodes: 1}] = 10 // linear: 10 steps/s per worker
			}
			r := h.round()
			if !tc.reshaped {
				must.SliceEmpty(t, r.Actions, must.Sprintf("actions %+v", r.Actions))
				must.StrContains(t, findJob(t, r, tc.held).Plan.Reason, tc.reason)
				must.Eq(t, 3, count(t, h.nomad, "a"))
				return
			}
			must.Eq(t, 2, count(t, h.nomad, "a"), must.Sprintf("actions %+v", r.Actions))
			must.Eq(t, 2, count(t, h.nomad, "b"), must.Sprintf("actions %+v", r.Actions))
		})
	}
}

// running lists running worker allocations, n per job, on node-0 and node-1.
func running(jobs map[string]int) []*nomadapi.AllocationListStub {
	var out []*nomadapi.AllocationListStub
	for id, n := range jobs {
		for i := 0; i < n; i++ {
			out = append(out, &nomadapi.AllocationListStub{ID: fmt.Sprintf("%s-%d", id, i), Namespace: "default", JobID: id,
				TaskGroup: "worker", NodeID: fmt.Sprintf("node-%d", i%2), ClientStatus: "running", DesiredStatus: "run"})
		}
	}
	return out
}

// TestManager_NewcomerGetsRoomFromRunningJobs: a job submitted with one
// worker into a full cluster asks for a worker it does not run; the plan
// that shrinks a running job to start it is admission, not a reshaping
// that must repay restarts (the first live run suspended the newcomer).
func TestManager_NewcomerGetsRoomFromRunningJobs(t *testing.T) {
	h := newHarness(t, defaultSettings(), 2) // 4 half-GPU workers
	for _, id := range []string{"a", "b"} {
		h.nomad.PutJob(fakenomad.TrainingJob(id, 2, map[string]string{"caravan_max_workers": "4", "caravan_total_steps": "2000"}))
	}
	h.nomad.SetAllocs(running(map[string]int{"a": 2, "b": 2}))
	deadlineAllocs(t, h, 2)
	for _, id := range []string{"a", "b"} {
		h.mgr.memFor(source.JobKey{Namespace: "default", ID: id}).speed[shape{workers: 2, nodes: 2}] = 20
	}
	h.clk.Advance(time.Second)
	h.nomad.PutJob(fakenomad.TrainingJob("c", 1, map[string]string{"caravan_max_workers": "4", "caravan_total_steps": "2000"}))
	r := h.round()
	must.Eq(t, 1, count(t, h.nomad, "c"), must.Sprintf("actions %+v", r.Actions))
	must.Eq(t, 3, count(t, h.nomad, "a")+count(t, h.nomad, "b"))
	// The shrink's event says whom it made room for, and cites no gain.
	shrunk := 0
	for _, a := range r.Actions {
		if a.To < a.From {
			shrunk++
			must.StrContains(t, a.Message, "to make room for c")
			must.StrNotContains(t, a.Message, "marginal gain")
		}
	}
	must.Eq(t, 1, shrunk, must.Sprintf("actions %+v", r.Actions))
}

// TestManager_CompletedBatchJobHoldsNothing: live, a train-elastic job that
// reached its declared steps kept its worker count while Nomad marked it
// dead; the planner still planned its workers, so the GPU it had freed could
// not go to anyone else.
func TestManager_CompletedBatchJobHoldsNothing(t *testing.T) {
	h := newHarness(t, defaultSettings(), 1) // 1 GPU: 2 half-GPU workers
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "1"}))
	h.nomad.PutJob(fakenomad.TrainingJob("b", 1, map[string]string{"caravan_max_workers": "2"}))
	h.nomad.SetAllocs(running(map[string]int{"b": 1}))
	h.measuredAt("b", 1)
	h.nomad.SetJobStatus("default", "a", "dead")
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		j, ok := h.src.Snapshot().Jobs[source.JobKey{Namespace: "default", ID: "a"}]
		return ok && j.Job.Status != nil && *j.Job.Status == "dead"
	}), wait.Timeout(2500*time.Millisecond), wait.Gap(5*time.Millisecond)))
	r := h.round()
	must.Eq(t, StateStopped, findJob(t, r, "a").State)
	must.Eq(t, 2, count(t, h.nomad, "b"), must.Sprintf("actions %+v", r.Actions))
}
