package httpapi

import (
	"math"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caravan-nomad/caravan/planner/service/manager"
)

// plannerCollector turns the manager's counters and the last round into
// Prometheus metrics at scrape time. Job metrics carry the labels
// namespace and nomad_job (never job or instance: Prometheus's target
// labels). A value the planner does not know (NaN or infinite) is left
// out rather than printed as a number.
type plannerCollector struct{ s *Server }

var (
	descLeader        = desc("leader", "1 if this instance leads (and may write to Nomad), else 0.")
	descRounds        = desc("rounds_total", "Decision rounds run.")
	descRoundErrors   = desc("round_errors_total", "Decision rounds that failed.")
	descRoundDuration = desc("round_duration_seconds", "Duration of decision rounds.")
	descApplied       = desc("actions_applied_total", "Decisions written to Nomad, by kind.", "kind")
	descConflicts     = desc("write_conflicts_total", "Writes Nomad refused because the job changed since it was read (never overwritten).")
	descWriteErrors   = desc("write_errors_total", "Writes that failed for other reasons (retried next round).")
	descDeferred      = desc("actions_deferred_total", "Decisions deferred by the per-round rate limit or a cooldown.")
	descReports       = desc("progress_reports_total", "Progress reports received, by HTTP status code.", "code")
	descManaged       = desc("managed_jobs", "Managed jobs by state.", "state")
	descWorkers       = desc("job_workers", "Desired workers of each managed job.", "namespace", "nomad_job")
	descStepsPerSec   = desc("job_steps_per_second", "Measured training steps per second (absent until measured).", "namespace", "nomad_job")
	descLoss          = desc("job_loss", "Latest reported training loss (absent until reported).", "namespace", "nomad_job")
	descRemaining     = desc("job_remaining_steps", "Predicted remaining steps (absent while unknown).", "namespace", "nomad_job")
	descCapacity      = desc("capacity_gpus", "GPU capacity the planner allocates, in GPUs (fractions for shares).")
	descPlanned       = desc("planned_gpus", "GPU demand of the current plan, in GPUs (fractions for shares).")
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("caravan_planner_"+name, help, labels, nil)
}

func (c plannerCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c plannerCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	m := s.Rounds.MetricsSnapshot()
	leader := 0.0
	if s.Leader.IsLeader() {
		leader = 1
	}
	gauge(ch, descLeader, leader)
	counter(ch, descRounds, float64(m.Rounds))
	counter(ch, descRoundErrors, float64(m.RoundErrors))
	ch <- prometheus.MustNewConstHistogram(descRoundDuration, m.RoundSeconds.Count, m.RoundSeconds.Sum, m.RoundSeconds.Cumulative())
	for k, n := range m.Applied {
		counter(ch, descApplied, float64(n), string(k))
	}
	counter(ch, descConflicts, float64(m.Conflicts))
	counter(ch, descWriteErrors, float64(m.WriteErrors))
	counter(ch, descDeferred, float64(m.Deferred))
	s.mu.Lock()
	for code, n := range s.reports {
		counter(ch, descReports, float64(n), strconv.Itoa(code))
	}
	s.mu.Unlock()
	c.collectRound(ch, s.Rounds.Last())
}

func (c plannerCollector) collectRound(ch chan<- prometheus.Metric, last *manager.Round) {
	if last == nil {
		return
	}
	states := map[manager.State]int{}
	for _, j := range last.Jobs {
		states[j.State]++
		gauge(ch, descWorkers, float64(j.Workers), j.Namespace, j.ID)
		if j.Fit.StepsPerSec > 0 {
			gauge(ch, descStepsPerSec, j.Fit.StepsPerSec, j.Namespace, j.ID)
		}
		if j.Fit.Step > 0 {
			gauge(ch, descLoss, j.Fit.Loss, j.Namespace, j.ID)
		}
		if j.Fit.RemainingSteps >= 0 {
			gauge(ch, descRemaining, j.Fit.RemainingSteps, j.Namespace, j.ID)
		}
	}
	for st, n := range states {
		gauge(ch, descManaged, float64(n), string(st))
	}
	collectQueues(ch, last.Queues, last.QueueGuarantees)
	if last.Plan != nil {
		gauge(ch, descCapacity, float64(last.Plan.CapacityGPUMilli)/1000)
		gauge(ch, descPlanned, float64(last.Plan.UsedGPUMilli)/1000)
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}
