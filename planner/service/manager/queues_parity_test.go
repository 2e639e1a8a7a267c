package manager

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/queue"
	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
)

// TestManager_QueuesMatchTheSimulator hands the live planner (a round on
// the fake Nomad) and the simulator's round (engine.PlanWithQueues, the
// code every simulator engine runs with queues) the same queue state and
// compares their decisions. On 2 GPUs (4 half-GPU workers) under fifo:
// team b's gang "b" holds both GPUs (one borrowed); team a's gang "a"
// waits within its guarantee; team b's "c" waits with Nomad priority 70;
// "d" names a queue that does not exist. Both suspend b for team a, admit
// a and c, hold d in its namespace's queue saying why, and plan the same
// workers for every job.
func TestManager_QueuesMatchTheSimulator(t *testing.T) {
	s := defaultSettings()
	s.Policy.Name = "fifo"
	s.Queues = twoTeamQueues()
	h := newHarness(t, s, 2)
	h.nomad.PutJob(fakenomad.TrainingJob("b", 4, gangMeta("4", nil)))
	h.nomad.SetAllocs(running(map[string]int{"b": 4}))
	h.nomad.PutJob(fakenomad.TrainingJob("a", 0, gangMeta("2", map[string]string{queue.MetaKey: "team-a"})))
	c := fakenomad.TrainingJob("c", 0, gangMeta("2", nil))
	c.Priority = ptrTo(70)
	h.nomad.PutJob(c)
	h.nomad.PutJob(fakenomad.TrainingJob("d", 0, gangMeta("2", map[string]string{queue.MetaKey: "ghost"})))
	live := h.round()

	// The same state as the simulator describes it.
	half := policy.Demand{GPUMilli: 500}
	gang := func(id string, prio int, held []policy.NodeAlloc) policy.Job {
		w := 0
		for _, na := range held {
			w += na.Workers
		}
		n := 2
		if id == "b" {
			n = 4
		}
		return policy.Job{ID: id, Priority: prio, Min: n, Max: n, Gang: true, Worker: half,
			Current: policy.Allocation{Workers: w, Placement: held}}
	}
	in := policy.Input{Now: live.Time, Cluster: live.Capacity, Jobs: []policy.Job{
		gang("a", 50, nil),
		gang("b", 50, []policy.NodeAlloc{{Node: "node-0", Workers: 2}, {Node: "node-1", Workers: 2}}),
		gang("c", 70, nil),
		gang("d", 50, nil),
	}}
	requested := map[string]string{"a": "team-a", "d": "ghost"}
	qjobs := make([]queue.Job, len(in.Jobs))
	for i := range in.Jobs {
		qjobs[i] = queue.FromPolicy(&in.Jobs[i], "default", requested[in.Jobs[i].ID])
	}
	plan, sim, err := engine.PlanWithQueues(policy.NewFIFO(), s.Queues, in, qjobs)
	must.NoError(t, err)
	must.NotNil(t, sim)

	must.Eq(t, sim.Queues, live.Queues)
	views := map[string]JobView{}
	for _, v := range live.Jobs {
		views[v.ID] = v
	}
	for i, want := range sim.Jobs {
		v, ok := views[want.ID]
		must.True(t, ok, must.Sprintf("live round has no job %s", want.ID))
		must.NotNil(t, v.Queue)
		got := *v.Queue
		got.ID = want.ID
		must.Eq(t, want, got, must.Sprintf("job %s", want.ID))
		must.Eq(t, plan.Jobs[i].Workers, count(t, h.nomad, want.ID), must.Sprintf("job %s: %+v", want.ID, live.Actions))
	}
	must.True(t, sim.Jobs[1].Suspend)
	must.Eq(t, "team-a", sim.Jobs[1].ReclaimFor)
	must.True(t, sim.Jobs[0].Admit && sim.Jobs[2].Admit)
	must.StrContains(t, sim.Jobs[3].Reason, `caravan_queue="ghost" names no queue`)
}

func ptrTo[T any](v T) *T { return &v }
