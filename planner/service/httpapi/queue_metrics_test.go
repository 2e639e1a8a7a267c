package httpapi

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/queue"
	"github.com/caravan-nomad/caravan/planner/service/manager"
)

type queueRounds struct{ metricRounds }

func (queueRounds) Last() *manager.Round {
	return &manager.Round{Queues: []queue.QueueState{
		{Name: "team-a", Guarantee: 2000, Effective: 2000, Used: 1000, Lent: 500, Waiting: 0, Reclaims: 1},
		{Name: "team-b", Guarantee: 1500, Effective: 1500, Used: 2000, Borrowed: 500, Waiting: 3},
	}, QueueGuarantees: &queue.Guarantees{Capacity: 4000, Configured: 3500, Effective: 3500}}
}

// scaledRounds: a node lost, the guarantees (2 + 2) scaled to the 3 GPUs left.
type scaledRounds struct{ metricRounds }

func (scaledRounds) Last() *manager.Round {
	return &manager.Round{Queues: []queue.QueueState{
		{Name: "team-a", Guarantee: 2000, Effective: 1500},
		{Name: "team-b", Guarantee: 2000, Effective: 1500},
	}, QueueGuarantees: &queue.Guarantees{Capacity: 3000, Configured: 4000, Effective: 3000, Shortfall: 1000}}
}

func TestMetrics_QueueGuaranteesScaled(t *testing.T) {
	s := &Server{ID: "p", Rounds: scaledRounds{}, Leader: follower{}, Source: snap{}}
	_, body := scrape(t, s)
	for _, line := range []string{
		`caravan_planner_queue_guarantee_gpus{queue="team-a"} 2`,
		`caravan_planner_queue_effective_guarantee_gpus{queue="team-a"} 1.5`,
		`caravan_planner_queue_effective_guarantee_gpus{queue="team-b"} 1.5`,
		`caravan_planner_queue_guarantee_shortfall_gpus 1`,
	} {
		must.StrContains(t, body, line+"\n")
	}
}

func TestMetrics_PerQueue(t *testing.T) {
	s := &Server{ID: "p", Rounds: queueRounds{}, Leader: follower{}, Source: snap{}}
	_, body := scrape(t, s)
	for _, line := range []string{
		`caravan_planner_queue_guarantee_gpus{queue="team-a"} 2`,
		`caravan_planner_queue_guarantee_gpus{queue="team-b"} 1.5`,
		`caravan_planner_queue_effective_guarantee_gpus{queue="team-b"} 1.5`,
		`caravan_planner_queue_guarantee_shortfall_gpus 0`,
		`caravan_planner_queue_used_gpus{queue="team-b"} 2`,
		`caravan_planner_queue_borrowed_gpus{queue="team-b"} 0.5`,
		`caravan_planner_queue_lent_gpus{queue="team-a"} 0.5`,
		`caravan_planner_queue_waiting_jobs{queue="team-b"} 3`,
		`caravan_planner_queue_round_reclaims{queue="team-a"} 1`,
	} {
		must.StrContains(t, body, line+"\n")
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	must.NoError(t, err)
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "caravan_planner_queue") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
}

func TestMetrics_NoQueuesNoQueueMetrics(t *testing.T) {
	s := &Server{ID: "p", Rounds: metricRounds{}, Leader: follower{}, Source: snap{}}
	_, body := scrape(t, s)
	must.StrNotContains(t, body, "caravan_planner_queue_")
}
