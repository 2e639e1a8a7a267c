package manager

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/queue"
	"github.com/caravan-nomad/caravan/planner/service/internal/fakenomad"
	"github.com/caravan-nomad/caravan/planner/service/source"
)

// twoTeamQueues: team b owns the default namespace, team a another one
// whose queue jobs of the default namespace may choose (the harness's
// fake watches only the default namespace); a GPU guaranteed each.
func twoTeamQueues() queue.Config {
	return queue.Config{Queues: []queue.Queue{
		{Name: "team-a", Namespaces: []string{"team-a"}, Allow: []string{"default"}, Guarantee: 1000,
			BorrowLimit: queue.Unlimited, LendLimit: queue.Unlimited, Weight: 1},
		{Name: "team-b", Namespaces: []string{"default"}, Guarantee: 1000,
			BorrowLimit: queue.Unlimited, LendLimit: queue.Unlimited, Weight: 1},
	}}
}

func gangMeta(n string, extra map[string]string) map[string]string {
	m := map[string]string{"caravan_min_workers": n, "caravan_max_workers": n, "caravan_gang": "true"}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// TestManager_QueuesReclaimABorrower: team b's gang holds both GPUs (one
// borrowed); team a submits a job within its guarantee; the round
// suspends b's gang, naming team a, and starts a's job.
func TestManager_QueuesReclaimABorrower(t *testing.T) {
	s := defaultSettings()
	s.Queues = twoTeamQueues()
	h := newHarness(t, s, 2) // 2 GPUs: 4 half-GPU workers
	h.nomad.PutJob(fakenomad.TrainingJob("b", 4, gangMeta("4", nil)))
	h.nomad.SetAllocs(running(map[string]int{"b": 4}))
	h.nomad.PutJob(fakenomad.TrainingJob("a", 0, gangMeta("2", map[string]string{queue.MetaKey: "team-a"})))
	r := h.round()
	byJob := map[string]Action{}
	for _, a := range r.Actions {
		byJob[a.Job] = a
	}
	must.Eq(t, KindSuspend, byJob["default/b"].Kind, must.Sprintf("%+v", r.Actions))
	must.StrContains(t, byJob["default/b"].Reason, "reclaimed: queue team-a")
	must.Eq(t, 2, byJob["default/a"].To, must.Sprintf("%+v", r.Actions))
	must.Eq(t, 0, count(t, h.nomad, "b"))
	must.Eq(t, 2, count(t, h.nomad, "a"))
	must.SliceLen(t, 3, r.Queues)
	must.Eq(t, queue.QueueState{Name: "team-a", Guarantee: 1000, Used: 1000, Reclaims: 1}, r.Queues[0])
	// Parity: the simulator hands planner/queue the same state (b holds
	// 2 GPUs, a waits for 1) and gets the same verdicts.
	sim, err := queue.Decide(s.Queues, 2000, []queue.Job{
		{ID: "a", Namespace: "default", Requested: "team-a", Priority: 50, Min: 1000, Max: 1000},
		{ID: "b", Namespace: "default", Priority: 50, Min: 2000, Max: 2000, Held: 2000},
	})
	must.NoError(t, err)
	must.Eq(t, sim.Queues, r.Queues)
	for i, v := range r.Jobs {
		must.NotNil(t, v.Queue)
		got, want := *v.Queue, sim.Jobs[i]
		got.ID, want.ID = "", ""
		must.Eq(t, want, got)
	}
}

// TestManager_QueuesMetaRefused: a job naming a queue its namespace may
// not use runs in its namespace's queue, and the round says why.
func TestManager_QueuesMetaRefused(t *testing.T) {
	s := defaultSettings()
	s.Queues = twoTeamQueues()
	s.Queues.Queues[0].Allow = nil
	h := newHarness(t, s, 2)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 0, gangMeta("2", map[string]string{queue.MetaKey: "team-a"})))
	r := h.round()
	must.SliceLen(t, 1, r.Jobs)
	must.Eq(t, "team-b", r.Jobs[0].Queue.Queue)
	must.StrContains(t, r.Jobs[0].Queue.Reason, `namespace "default" may not use that queue`)
}

// TestManager_QueuesInvalidForCluster: guarantees beyond the cluster's
// GPUs fail the round with an error naming the queue, and nothing is written.
func TestManager_QueuesInvalidForCluster(t *testing.T) {
	s := defaultSettings()
	s.Queues = twoTeamQueues()
	s.Queues.Queues[1].Guarantee = 5000
	h := newHarness(t, s, 2)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 0, gangMeta("2", nil)))
	h.sync()
	_, err := h.mgr.RunRound(t.Context())
	must.ErrorContains(t, err, `queue "team-b": guarantee`)
	must.Eq(t, 0, count(t, h.nomad, "a"))
}

// TestManager_QueuesReclaimShrinksInCooldown: team b's elastic job grew
// to both GPUs (one borrowed) and is in its cooldown when team a submits a
// job within its guarantee. The queues cap b at its guarantee; the round
// shrinks b at once and starts a, as the queues' suspend of a borrower
// does, instead of holding b past its cap until the cooldown ends (the
// live e2e waited the cooldown out before team a's first step).
func TestManager_QueuesReclaimShrinksInCooldown(t *testing.T) {
	s := defaultSettings()
	s.Queues = twoTeamQueues()
	h := newHarness(t, s, 2) // 2 GPUs: 4 half-GPU workers
	h.nomad.PutJob(fakenomad.TrainingJob("b", 4, map[string]string{"caravan_min_workers": "1", "caravan_max_workers": "4"}))
	h.nomad.SetAllocs(running(map[string]int{"b": 4}))
	h.sync()
	h.mgr.memFor(source.JobKey{Namespace: "default", ID: "b"}).lastChange = h.clk.Now() // just grew
	h.nomad.PutJob(fakenomad.TrainingJob("a", 0, gangMeta("2", map[string]string{queue.MetaKey: "team-a"})))
	r := h.round()
	must.Eq(t, 2, count(t, h.nomad, "b"), must.Sprintf("actions %+v", r.Actions))
	must.Eq(t, 2, count(t, h.nomad, "a"), must.Sprintf("actions %+v", r.Actions))
}
