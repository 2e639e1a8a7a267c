package manager

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/planner/queue"
	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
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
	must.Eq(t, queue.QueueState{Name: "team-a", Guarantee: 1000, Effective: 1000, Used: 1000, Reclaims: 1}, r.Queues[0])
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

// TestManager_QueuesLostNodeKeepsDeciding: the guarantees (1 GPU each)
// add up to the cluster's 2 GPUs, team b's gang runs on node-0 with 1
// GPU, and node-1 goes down. The round no longer fails with "the
// guarantees add up to 2 GPUs ... more than the cluster's 1": each
// guarantee is scaled to 0.5 GPU, team a's job within it reclaims b's
// borrowed GPU, the round says why, and the simulator decides the same.
func TestManager_QueuesLostNodeKeepsDeciding(t *testing.T) {
	s := defaultSettings()
	s.Queues = twoTeamQueues()
	h := newHarness(t, s, 2) // 2 GPUs: 4 half-GPU workers
	h.nomad.PutJob(fakenomad.TrainingJob("b", 2, gangMeta("2", nil)))
	allocs := running(map[string]int{"b": 2})
	for _, a := range allocs {
		a.NodeID = "node-0"
	}
	h.nomad.SetAllocs(allocs)
	r := h.round()
	must.Eq(t, queue.Guarantees{Capacity: 2000, Configured: 2000, Effective: 2000}, *r.QueueGuarantees)

	h.nomad.SetNodes([]*nomadapi.NodeListStub{
		{ID: "node-0", Name: "client1", Status: "ready", SchedulingEligibility: "eligible"},
		{ID: "node-1", Name: "client2", Status: "down", SchedulingEligibility: "eligible"},
	})
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		n := 0
		for _, node := range h.src.Snapshot().Nodes {
			if node.Ready {
				n++
			}
		}
		return n == 1
	}), wait.Timeout(5*time.Second), wait.Gap(5*time.Millisecond)))
	h.nomad.PutJob(fakenomad.TrainingJob("a", 0, gangMeta("1", map[string]string{queue.MetaKey: "team-a"})))
	r = h.round()
	must.Eq(t, "", r.Error)
	byJob := map[string]Action{}
	for _, a := range r.Actions {
		byJob[a.Job] = a
	}
	must.Eq(t, KindSuspend, byJob["default/b"].Kind, must.Sprintf("%+v", r.Actions))
	must.StrContains(t, byJob["default/b"].Reason, "reclaimed: queue team-a")
	must.Eq(t, 0, count(t, h.nomad, "b"))
	must.Eq(t, 1, count(t, h.nomad, "a"))
	must.Eq(t, queue.QueueState{Name: "team-a", Guarantee: 1000, Effective: 500, Used: 500, Reclaims: 1}, r.Queues[0])
	must.Eq(t, queue.QueueState{Name: "team-b", Guarantee: 1000, Effective: 500, Waiting: 1}, r.Queues[1])
	g := r.QueueGuarantees
	must.Eq(t, 1000, g.Capacity)
	must.Eq(t, 1000, g.Shortfall)
	must.StrContains(t, g.Note, "more than the live cluster's 1")

	// Parity: the simulator's round on the same state decides the same.
	sim, err := queue.Decide(s.Queues, 1000, []queue.Job{
		{ID: "a", Namespace: "default", Requested: "team-a", Priority: 50, Min: 500, Max: 500},
		{ID: "b", Namespace: "default", Priority: 50, Min: 1000, Max: 1000, Held: 1000},
	})
	must.NoError(t, err)
	must.Eq(t, sim.Queues, r.Queues)
	must.Eq(t, sim.Guarantees, *r.QueueGuarantees)
	for i, v := range r.Jobs {
		must.NotNil(t, v.Queue)
		got, want := *v.Queue, sim.Jobs[i]
		got.ID, want.ID = "", ""
		must.Eq(t, want, got)
	}
}

// TestManager_QueueGuaranteesLoggedOnChange: the scaling is logged once
// when it starts or changes, not every round, and its end once.
func TestManager_QueueGuaranteesLoggedOnChange(t *testing.T) {
	var buf bytes.Buffer
	m := &Manager{log: hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})}
	round := func(capacity int) *Round {
		return &Round{QueueGuarantees: &queue.Guarantees{Capacity: capacity, Configured: 2000,
			Shortfall: max(2000-capacity, 0), Note: "scaled"}}
	}
	var prev *Round
	for _, c := range []int{2000, 1000, 1000, 1000, 500, 2000, 2000} {
		r := round(c)
		m.logGuarantees(prev, r)
		prev = r
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	must.SliceLen(t, 3, lines, must.Sprint(buf.String()))
	must.StrContains(t, lines[0], "[WARN]  queue guarantees scaled to the live cluster: configured_gpus=2 capacity_gpus=1 shortfall_gpus=1")
	must.StrContains(t, lines[1], "capacity_gpus=0.5 shortfall_gpus=1.5")
	must.StrContains(t, lines[2], "[INFO]  queue guarantees fit the live cluster again")
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
