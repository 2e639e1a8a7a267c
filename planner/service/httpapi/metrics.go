package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"

	"github.com/caravan-nomad/caravan/planner/service/manager"
)

// metrics is GET /v1/metrics in the Prometheus text exposition format.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	m := s.Rounds.MetricsSnapshot()
	metric := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	value := func(name string, labels string, v float64) {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			v = -1
		}
		if labels != "" {
			labels = "{" + labels + "}"
		}
		fmt.Fprintf(&b, "%s%s %g\n", name, labels, v)
	}
	leader := 0.0
	if s.Leader.IsLeader() {
		leader = 1
	}
	metric("caravan_planner_leader", "gauge", "1 if this instance leads (and may write to Nomad).")
	value("caravan_planner_leader", "", leader)
	metric("caravan_planner_rounds_total", "counter", "Decision rounds run.")
	value("caravan_planner_rounds_total", "", float64(m.Rounds))
	metric("caravan_planner_round_errors_total", "counter", "Decision rounds that failed.")
	value("caravan_planner_round_errors_total", "", float64(m.RoundErrors))
	metric("caravan_planner_round_duration_seconds", "gauge", "Duration of the last decision round.")
	value("caravan_planner_round_duration_seconds", "", m.LastRoundMillis/1000)
	metric("caravan_planner_actions_applied_total", "counter", "Decisions written to Nomad, by kind.")
	kinds := make([]string, 0, len(m.Applied))
	for k := range m.Applied {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		value("caravan_planner_actions_applied_total", fmt.Sprintf("kind=%q", k), float64(m.Applied[manager.Kind(k)]))
	}
	metric("caravan_planner_write_conflicts_total", "counter", "Writes Nomad refused because the job changed since it was read (never overwritten).")
	value("caravan_planner_write_conflicts_total", "", float64(m.Conflicts))
	metric("caravan_planner_write_errors_total", "counter", "Writes that failed for other reasons (retried next round).")
	value("caravan_planner_write_errors_total", "", float64(m.WriteErrors))
	metric("caravan_planner_actions_deferred_total", "counter", "Decisions deferred by the per-round rate limit.")
	value("caravan_planner_actions_deferred_total", "", float64(m.Deferred))

	s.mu.Lock()
	codes := make([]int, 0, len(s.reports))
	for c := range s.reports {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	metric("caravan_planner_progress_reports_total", "counter", "Progress reports received, by HTTP status.")
	for _, c := range codes {
		value("caravan_planner_progress_reports_total", fmt.Sprintf("code=\"%d\"", c), float64(s.reports[c]))
	}
	s.mu.Unlock()

	if last := s.Rounds.Last(); last != nil {
		states := map[manager.State]int{}
		metric("caravan_planner_job_workers", "gauge", "Desired workers of each managed job.")
		for _, j := range last.Jobs {
			states[j.State]++
			value("caravan_planner_job_workers", jobLabels(j), float64(j.Workers))
		}
		metric("caravan_planner_job_steps_per_second", "gauge", "Measured training steps per second.")
		for _, j := range last.Jobs {
			value("caravan_planner_job_steps_per_second", jobLabels(j), j.Fit.StepsPerSec)
		}
		metric("caravan_planner_job_loss", "gauge", "Latest reported training loss.")
		for _, j := range last.Jobs {
			value("caravan_planner_job_loss", jobLabels(j), j.Fit.Loss)
		}
		metric("caravan_planner_job_remaining_steps", "gauge", "Predicted remaining steps (-1: unknown).")
		for _, j := range last.Jobs {
			value("caravan_planner_job_remaining_steps", jobLabels(j), j.Fit.RemainingSteps)
		}
		metric("caravan_planner_managed_jobs", "gauge", "Managed jobs by state.")
		names := make([]string, 0, len(states))
		for st := range states {
			names = append(names, string(st))
		}
		sort.Strings(names)
		for _, st := range names {
			value("caravan_planner_managed_jobs", fmt.Sprintf("state=%q", st), float64(states[manager.State(st)]))
		}
		if last.Plan != nil {
			metric("caravan_planner_capacity_gpu_milli", "gauge", "GPU capacity the planner allocates, in milli-GPUs.")
			value("caravan_planner_capacity_gpu_milli", "", float64(last.Plan.CapacityGPUMilli))
			metric("caravan_planner_planned_gpu_milli", "gauge", "GPU demand of the current plan, in milli-GPUs.")
			value("caravan_planner_planned_gpu_milli", "", float64(last.Plan.UsedGPUMilli))
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

func jobLabels(j manager.JobView) string {
	return fmt.Sprintf("namespace=%q,job=%q", j.Namespace, j.ID)
}
