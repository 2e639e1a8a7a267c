package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/queue"
)

// Per-queue metrics of the last round (absent without queues), in GPUs.
var (
	descQueueGuarantee = desc("queue_guarantee_gpus", "GPUs guaranteed to the team queue, as configured.", "queue")
	descQueueEffective = desc("queue_effective_guarantee_gpus",
		"GPUs guaranteed to the team queue this round: as configured, or scaled to its share of the live cluster when the guarantees add up to more.", "queue")
	descQueueUsed     = desc("queue_used_gpus", "GPUs the queue's admitted jobs may use this round (minimums and caps).", "queue")
	descQueueBorrowed = desc("queue_borrowed_gpus", "GPUs the queue uses beyond its guarantee in force.", "queue")
	descShortfall     = desc("queue_guarantee_shortfall_gpus",
		"How many GPUs the configured guarantees add up to beyond the live cluster (0 when they fit; above 0 they are scaled).")
	descQueueLent     = desc("queue_lent_gpus", "The queue's idle guaranteed GPUs in use by other queues.", "queue")
	descQueueWaiting  = desc("queue_waiting_jobs", "The queue's jobs not admitted this round.", "queue")
	descQueueReclaims = desc("queue_round_reclaims", "Borrowers suspended for the queue in the last round.", "queue")
)

func collectQueues(ch chan<- prometheus.Metric, qs []queue.QueueState, g *queue.Guarantees) {
	gpus := func(m int) float64 { return float64(m) / policy.MilliGPU }
	if g != nil && len(qs) > 0 {
		gauge(ch, descShortfall, gpus(g.Shortfall))
	}
	for _, q := range qs {
		gauge(ch, descQueueGuarantee, gpus(q.Guarantee), q.Name)
		gauge(ch, descQueueEffective, gpus(q.Effective), q.Name)
		gauge(ch, descQueueUsed, gpus(q.Used), q.Name)
		gauge(ch, descQueueBorrowed, gpus(q.Borrowed), q.Name)
		gauge(ch, descQueueLent, gpus(q.Lent), q.Name)
		gauge(ch, descQueueWaiting, float64(q.Waiting), q.Name)
		gauge(ch, descQueueReclaims, float64(q.Reclaims), q.Name)
	}
}
