// Package enginetest holds what the simulator engines' parity tests share:
// one job as the live planner reads it from Nomad (history.Live, sized by
// its meta through source.Spec.Request, as manager.policyJob does), and
// Check, which holds an engine's policy.Job for the same history to it.
package enginetest

import (
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/history"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/service/source"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
)

// The job asks for Requested workers of one GPU each (any count from one
// for a policy that may choose; no resize cost declared). Its history, in
// simulated seconds: submitted at Submitted; one worker from 160 s; moved
// at 400 s (a restart); suspended at 520 s; resumed at Resumed with the
// caller's worker count (a restart); observed at Now.
const (
	Requested = 4
	Restarts  = 2
	Submitted = 100.0
	Resumed   = 700.0
	Now       = 880.0
)

// Attained is the GPU-seconds the job has held with workers running since
// Resumed.
func Attained(workers int) float64 { return 240 + 120 + float64(workers)*(Now-Resumed) }

// Live is the job's record and request as the live manager builds them,
// running workers workers now.
func Live(t *testing.T, workers int) (history.Record, history.Request) {
	t.Helper()
	at := func(s float64) time.Time { return engine.At(s) }
	submit := at(Submitted).UnixNano()
	job := &nomadapi.Job{ID: ptr("job-1"), SubmitTime: &submit, Meta: map[string]string{
		source.MetaEnabled: "true", source.MetaMinWorkers: "1", source.MetaMaxWorkers: "4",
	}, TaskGroups: []*nomadapi.TaskGroup{{Name: ptr("worker"), Count: &workers}}}
	spec, err := source.ParseSpec(job)
	must.NoError(t, err)
	alloc := func(id string, start, end float64) *nomadapi.AllocationListStub {
		ts := &nomadapi.TaskState{State: "running", StartedAt: at(start),
			Events: []*nomadapi.TaskEvent{{Type: nomadapi.TaskStarted, Time: at(start).UnixNano()}}}
		status := "running"
		if end > 0 {
			ts.State, ts.FinishedAt, status = "dead", at(end), "complete"
		}
		return &nomadapi.AllocationListStub{ID: id, TaskGroup: "worker", ClientStatus: status,
			CreateTime: at(start).UnixNano(), TaskStates: map[string]*nomadapi.TaskState{"train": ts}}
	}
	allocs := []*nomadapi.AllocationListStub{alloc("a", 160, 400), alloc("b", 400, 520)}
	for i := range workers {
		allocs = append(allocs, alloc(string(rune('c'+i)), Resumed, 0))
	}
	rec, _ := history.Live{ID: "job-1", Kind: "job-1", Group: "worker", GPUMilli: policy.MilliGPU, Workers: workers,
		RestartCost: engine.Seconds(engine.RestartPenalty), Job: job, Allocs: allocs}.Record(at(Now))
	must.Eq(t, Restarts, rec.Restarts)
	must.Eq(t, Attained(workers), rec.Attained)
	return rec, spec.Request(policy.MilliGPU)
}

// Unmodelled names what an engine does not hand the policy; Check skips it.
type Unmodelled int

const (
	// NoAttained: the engine hands the policy no attained service.
	NoAttained Unmodelled = iota + 1
)

// Check holds sim, an engine's policy job for this history under the
// policy info describes, to the live one: the same size (under FixedSize
// exactly Requested, all or nothing), demand, resize and restart cost,
// age, restarts, current workers and attained service.
func Check(t *testing.T, info policy.Info, workers int, sim policy.Job, skip ...Unmodelled) {
	t.Helper()
	rec, req := Live(t, workers)
	live := rec.PolicyJob(info.Traits, req)
	size := func(pj policy.Job) [3]any { return [3]any{pj.Min, pj.Max, pj.Gang} }
	if info.Traits.FixedSize {
		must.Eq(t, [3]any{Requested, Requested, true}, size(live), must.Sprint("live"))
	}
	must.Eq(t, size(live), size(sim), must.Sprint("min, max, gang"))
	must.Eq(t, live.Worker, sim.Worker)
	must.Eq(t, live.ResizeCost, sim.ResizeCost)
	must.Eq(t, live.RestartCost, sim.RestartCost)
	must.Eq(t, live.Age, sim.Age)
	must.Eq(t, live.Restarts, sim.Restarts)
	must.Eq(t, live.Current.Workers, sim.Current.Workers)
	skipped := map[Unmodelled]bool{}
	for _, s := range skip {
		skipped[s] = true
	}
	if !skipped[NoAttained] {
		must.Eq(t, live.AttainedService, sim.AttainedService)
	}
}

func ptr[T any](v T) *T { return &v }
