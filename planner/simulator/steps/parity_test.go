package steps

import (
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/history"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/service/source"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/caravan-nomad/caravan/planner/simulator/enginetest"
)

// TestLiveAndSimulatorBuildTheSamePolicyJob: one job, asking for 4 workers
// of one GPU each, with one history (submitted at 100 s, running 3 workers
// since 700 s after two restarts, observed at 880 s), is handed to the live
// manager's job builder (history.Live's record, sized by the live job's
// meta through source.Spec.Request, as manager.policyJob does) and to the
// step engine's (stepState.policyJob). For every registered policy, the
// policy.Job they build agree on the job's size: under FixedSize (fifo,
// tiresias) exactly the requested 4, all or nothing (as every engine
// builds it: TestPolicyJobMatchesTheLivePlanner in each); otherwise the live job and the step engine (which models the
// live planner) agree on bounds, gang, demand and resize cost, and the
// history fields agree too. Before, the live builder ignored FixedSize.
func TestLiveAndSimulatorBuildTheSamePolicyJob(t *testing.T) {
	const requested = 4
	at := func(s float64) time.Time { return engine.Epoch.Add(time.Duration(s * float64(time.Second))) }
	submit := at(100).UnixNano()
	count := 3
	job := &nomadapi.Job{ID: ptr("job-1"), SubmitTime: &submit, Meta: map[string]string{
		source.MetaEnabled: "true", source.MetaMinWorkers: "1", source.MetaMaxWorkers: "4", source.MetaResizeCost: "5s",
	}, TaskGroups: []*nomadapi.TaskGroup{{Name: ptr("worker"), Count: &count}}}
	spec, err := source.ParseSpec(job)
	must.NoError(t, err)
	running := func(id string, start float64) *nomadapi.AllocationListStub {
		ts := &nomadapi.TaskState{State: "running", StartedAt: at(start),
			Events: []*nomadapi.TaskEvent{{Type: nomadapi.TaskStarted, Time: at(start).UnixNano()}}}
		return &nomadapi.AllocationListStub{ID: id, TaskGroup: "worker", ClientStatus: "running",
			CreateTime: at(start).UnixNano(), TaskStates: map[string]*nomadapi.TaskState{"train": ts}}
	}
	rec, _ := history.Live{ID: "job-1", Kind: "job-1", Group: "worker", GPUMilli: policy.MilliGPU, Workers: 3,
		RestartCost: 30 * time.Second, Job: job,
		Allocs: []*nomadapi.AllocationListStub{running("w1", 700), running("w2", 700), running("w3", 700)},
	}.Record(at(880))
	rec.Restarts = 2 // as the step engine's job below counts them

	cfg := StepConfig{WorkerMilliGPU: policy.MilliGPU, MaxWorkers: requested, RestartCost: 30, ResizeCost: 5}
	st := &stepState{spec: StepJob{Name: "job-1", Submitted: 100, Requested: requested}, desired: 3, workers: 3,
		restarts: 2, measured: map[int]bool{requested: true}}

	for _, info := range policy.Infos() {
		t.Run(info.Name, func(t *testing.T) {
			tr := info.Traits
			live := rec.PolicyJob(tr, spec.Request(policy.MilliGPU))
			steps := st.policyJob(cfg, info, 880)
			size := func(pj policy.Job) [3]any { return [3]any{pj.Min, pj.Max, pj.Gang} }
			if tr.FixedSize {
				want := [3]any{requested, requested, true}
				must.Eq(t, want, size(live), must.Sprint("live"))
				must.Eq(t, want, size(steps), must.Sprint("step engine"))
			}
			must.Eq(t, size(live), size(steps))
			must.Eq(t, live.Worker, steps.Worker)
			must.Eq(t, live.ResizeCost, steps.ResizeCost)
			must.Eq(t, live.RestartCost, steps.RestartCost)
			must.Eq(t, live.Age, steps.Age)
			must.Eq(t, live.Restarts, steps.Restarts)
			must.Eq(t, live.Current.Workers, steps.Current.Workers)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestPolicyJobMatchesTheLivePlanner: for every registered policy, the
// step engine's job for enginetest's history agrees with the live
// manager's (enginetest.Check), except in attained service, which the step
// engine does not hand the policy (stepState.record).
func TestPolicyJobMatchesTheLivePlanner(t *testing.T) {
	const workers = 3
	cfg := StepConfig{WorkerMilliGPU: policy.MilliGPU, MaxWorkers: enginetest.Requested, RestartCost: engine.RestartPenalty}
	for _, info := range policy.Infos() {
		t.Run(info.Name, func(t *testing.T) {
			st := &stepState{spec: StepJob{Name: "job-1", Submitted: enginetest.Submitted, Requested: enginetest.Requested},
				desired: workers, workers: workers, restarts: enginetest.Restarts,
				measured: map[int]bool{enginetest.Requested: true}}
			enginetest.Check(t, info, workers, st.policyJob(cfg, info, enginetest.Now), enginetest.NoAttained)
		})
	}
}
