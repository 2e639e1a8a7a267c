package pollux

import (
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/history"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/caravan-nomad/caravan/planner/workload"
)

// TestLiveAndSimulatorHandThePolicyTheSameHistory: one job history, played
// by the simulator (its own reallocate/step accounting) and written as the
// Nomad allocation history the live service reads (history.Live, what
// manager.policyJob calls), gives the policy identical history inputs:
// age, attained GPU-seconds, restarts, restart cost, current size.
//
// The history: submitted at 100 s; 2 GPUs from 160 s; shrunk to 1 GPU at
// 400 s (a restart); suspended at 520 s; resumed on 3 GPUs at 700 s (a
// restart); observed at 880 s. Attained: 2*240 + 1*120 + 3*180 = 1140.
func TestLiveAndSimulatorHandThePolicyTheSameHistory(t *testing.T) {
	dir := sharedData(t)
	apps, err := LoadApplications(dir)
	must.NoError(t, err)
	app := apps["cifar10"]
	j := newSimJob(workload.Job{Name: "job-1", Time: 100, Application: "cifar10", Replicas: 2, BatchSize: 128}, app, adaptiveBatch)

	const interval = 60.0
	play := func(from, to float64) {
		for now := from; now < to; now += interval {
			j.step(now, interval, 0)
		}
	}
	j.reallocate([]int{2}, []string{"node-000", "node-000"})
	play(160, 400)
	j.reallocate([]int{1}, []string{"node-000"})
	play(400, 520)
	j.reallocate(nil, nil)
	play(520, 700)
	j.reallocate([]int{3}, []string{"node-000", "node-000", "node-000"})
	play(700, 880)
	must.False(t, j.done())
	o := j.observed(880, nil)
	sim := baseJob(&o)

	at := func(s float64) time.Time { return engine.Epoch.Add(time.Duration(s * float64(time.Second))) }
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
	submit := at(100).UnixNano()
	live := history.Live{
		ID: "job-1", Kind: "cifar10", Group: "worker", GPUMilli: policy.MilliGPU, Workers: 3,
		RestartCost: time.Duration(engine.RestartPenalty * float64(time.Second)),
		Job:         &nomadapi.Job{SubmitTime: &submit},
		Allocs: []*nomadapi.AllocationListStub{
			alloc("w1", 160, 400), alloc("w2", 160, 520),
			alloc("w3", 700, 0), alloc("w4", 700, 0), alloc("w5", 700, 0),
		},
	}
	rec, _ := live.Record(at(880))
	lv := rec.Job()
	lv.Worker, lv.Min = policy.Demand{GPUMilli: policy.MilliGPU}, 1 // what policyJob adds from meta (1 GPU, min 1)

	// The live Current carries counts; policyJob adds the placement from
	// running allocations (the manager's own tests cover it).
	sim.Current.Placement = nil
	must.Eq(t, sim, lv)
	must.Eq(t, 1140.0, sim.AttainedService)
	must.Eq(t, 2, sim.Restarts)
}
