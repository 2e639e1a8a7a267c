package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/queue"
)

// Per-queue metrics of the last round (absent without queues), in GPUs.
var (
	descQueueGuarantee = desc("queue_guarantee_gpus", "GPUs guaranteed to the team queue.", "queue")
	descQueueUsed      = desc("queue_used_gpus", "GPUs the queue's admitted jobs may use this round (minimums and caps).", "queue")
	descQueueBorrowed  = desc("queue_borrowed_gpus", "GPUs the queue uses beyond its guarantee.", "queue")
	descQueueLent      = desc("queue_lent_gpus", "The queue's idle guaranteed GPUs in use by other queues.", "queue")
	descQueueWaiting   = desc("queue_waiting_jobs", "The queue's jobs not admitted this round.", "queue")
	descQueueReclaims  = desc("queue_round_reclaims", "Borrowers suspended for the queue in the last round.", "queue")
)

func collectQueues(ch chan<- prometheus.Metric, qs []queue.QueueState) {
	gpus := func(m int) float64 { return float64(m) / policy.MilliGPU }
	for _, q := range qs {
		gauge(ch, descQueueGuarantee, gpus(q.Guarantee), q.Name)
		gauge(ch, descQueueUsed, gpus(q.Used), q.Name)
		gauge(ch, descQueueBorrowed, gpus(q.Borrowed), q.Name)
		gauge(ch, descQueueLent, gpus(q.Lent), q.Name)
		gauge(ch, descQueueWaiting, float64(q.Waiting), q.Name)
		gauge(ch, descQueueReclaims, float64(q.Reclaims), q.Name)
	}
}
