package ui

import (
	"net/http"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/queue"
	"github.com/caravan-nomad/caravan/planner/service/manager"
)

func TestPages_Queues(t *testing.T) {
	r := &manager.Round{Leader: true,
		Queues: []queue.QueueState{
			{Name: "team-a", Guarantee: 2000, Effective: 2000, Used: 2000, Reclaims: 1},
			{Name: evil, Guarantee: 1500, Effective: 1500, Used: 1500, Borrowed: 500, Waiting: 1},
		},
		QueueGuarantees: &queue.Guarantees{Capacity: 4000, Configured: 3500, Effective: 3500},
		Jobs: []manager.JobView{
			{Namespace: "default", ID: "a1", Queue: &queue.Decision{Queue: "team-a", Admit: true, Cap: 2000, Reason: "admitted within queue team-a's guarantee"}},
			{Namespace: "default", ID: evil, Queue: &queue.Decision{Queue: evil, Suspend: true, ReclaimFor: "team-a", Reason: evil}},
			{Namespace: "default", ID: "w", Queue: &queue.Decision{Queue: evil, Reason: "queued"}, SinceCheckpoint: 42},
		},
		Reclaims: []manager.Reclaim{
			{Time: time.Date(2026, 11, 25, 1, 2, 3, 0, time.UTC), Job: "team-b/ps-job", Kind: manager.KindScale, From: 4, To: 2,
				PSFrom: 2, PSTo: 1, Queue: "team-a", Via: "registration"},
			{Time: time.Date(2026, 11, 25, 1, 2, 4, 0, time.UTC), Job: "team-b/" + evil, Kind: manager.KindSuspend, From: 2, Queue: evil, Via: "scale"},
		}}
	s, err := New(&Server{Planner: &fakePlanner{round: r}, Progress: fakeProgress{}})
	must.NoError(t, err)
	resp := get(t, s.Handler(), "/ui/queues", nil)
	must.Eq(t, http.StatusOK, resp.StatusCode)
	b := body(t, resp)
	must.StrContains(t, b, `<tr data-queue="team-a"><td>team-a</td><td class="n">2</td><td class="n">2</td><td class="n">2</td><td class="n">0</td><td class="n">0</td><td class="n">0</td><td class="n">1</td></tr>`)
	must.StrContains(t, b, `<td class="n">1.5</td>`)
	must.StrContains(t, b, "suspended</b> for team-a")
	must.StrContains(t, b, "waiting")
	must.StrContains(t, b, `<td class="n">42 s</td>`)
	must.StrContains(t, b, `<tr data-reclaim="team-b/ps-job"><td>01:02:03</td><td>team-b/ps-job</td><td>scale 4 &rarr; 2, servers 2 &rarr; 1</td><td>team-a</td><td>new job version + count-less scaling event</td></tr>`)
	must.StrContains(t, b, "<td>suspend 2 &rarr; 0</td>")
	must.StrNotContains(t, b, "<script>")
	must.StrContains(t, b, "&lt;script&gt;")
	must.StrContains(t, b, `href="/ui/queues" class="on"`)
	must.StrNotContains(t, b, "Guarantees scaled")
}

// TestPages_QueuesScaled: with a node lost, the page shows each guarantee
// as configured and in force, and a line saying why they differ.
func TestPages_QueuesScaled(t *testing.T) {
	g := queue.Guarantees{Capacity: 3000, Configured: 4000, Effective: 3000, Shortfall: 1000,
		Note: "the guarantees add up to 4 GPUs, more than the live cluster's 3 (ready nodes): scaled <b>"}
	r := &manager.Round{Leader: true, QueueGuarantees: &g, Queues: []queue.QueueState{
		{Name: "team-a", Guarantee: 2000, Effective: 1500, Used: 1000},
		{Name: "team-b", Guarantee: 2000, Effective: 1500, Used: 2000, Borrowed: 500},
	}}
	s, err := New(&Server{Planner: &fakePlanner{round: r}, Progress: fakeProgress{}})
	must.NoError(t, err)
	b := body(t, get(t, s.Handler(), "/ui/queues", nil))
	must.StrContains(t, b, `<tr data-queue="team-a"><td>team-a</td><td class="n">2</td><td class="n"><b>1.5</b></td><td class="n">1</td>`)
	must.StrContains(t, b, `<div class="msg" id="guarantees-scaled">Guarantees scaled: the guarantees add up to 4 GPUs, more than the live cluster&#39;s 3 (ready nodes): scaled &lt;b&gt;.`)
}

func TestPages_QueuesNone(t *testing.T) {
	s, err := New(&Server{Planner: &fakePlanner{round: &manager.Round{}}, Progress: fakeProgress{}})
	must.NoError(t, err)
	must.StrContains(t, body(t, get(t, s.Handler(), "/ui/queues", nil)), "No team queues are configured")
	s, err = New(&Server{Planner: &fakePlanner{}, Progress: fakeProgress{}})
	must.NoError(t, err)
	must.StrContains(t, body(t, get(t, s.Handler(), "/ui/queues", nil)), "No decision round yet")
}
