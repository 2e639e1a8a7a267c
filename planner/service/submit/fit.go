package submit

import (
	"context"
	"fmt"
	"sort"
	"strings"

	nomadapi "github.com/hashicorp/nomad/api"
)

// CapabilityPlan is what Nomad's job plan (the dry run) needs: Nomad
// checks a plan as it checks a submission (namespace submit-job), although
// a plan writes nothing.
const CapabilityPlan = CapabilitySubmit

// Fit is Nomad's answer to a dry run of a count change.
type Fit struct {
	// Failed maps each task group Nomad's plan could not place whole to
	// why (how many allocations stay unplaced, and what ran out).
	Failed map[string]string
}

// Fits reports whether the plan placed every allocation.
func (f Fit) Fits() bool { return len(f.Failed) == 0 }

// Reason is the plan's failures in one line, groups in name order.
func (f Fit) Reason() string {
	groups := make([]string, 0, len(f.Failed))
	for g := range f.Failed {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = fmt.Sprintf("group %s: %s", g, f.Failed[g])
	}
	return strings.Join(parts, "; ")
}

// PlanCounts asks Nomad's scheduler, without changing anything, whether
// the job (the version the planner read) with the given group counts
// places whole: a dry run of the update the planner is about to write
// (PUT /v1/job/:id/plan). A plan reserves nothing: a placement race
// remains possible after it.
func (w *Writer) PlanCounts(ctx context.Context, job *nomadapi.Job, counts map[string]int) (Fit, error) {
	cp, err := SetCounts(job, counts)
	if err != nil {
		return Fit{}, err
	}
	ns := ""
	if job.Namespace != nil {
		ns = *job.Namespace
	}
	q := (&nomadapi.WriteOptions{Namespace: ns}).WithContext(ctx)
	resp, _, err := w.Client.Jobs().PlanOpts(cp, &nomadapi.PlanOptions{}, q)
	if err != nil {
		if ferr := forbidden(err, CapabilityPlan); ferr != nil {
			return Fit{}, fmt.Errorf("planning %s/%s: %w", ns, *job.ID, ferr)
		}
		return Fit{}, fmt.Errorf("planning %s/%s: %w", ns, *job.ID, err)
	}
	fit := Fit{}
	for g, m := range resp.FailedTGAllocs {
		if fit.Failed == nil {
			fit.Failed = map[string]string{}
		}
		fit.Failed[g] = failure(m)
	}
	return fit, nil
}

// failure summarises one group's failed placements from Nomad's metric.
func failure(m *nomadapi.AllocationMetric) string {
	if m == nil {
		return "allocations unplaced"
	}
	s := fmt.Sprintf("%d allocation(s) unplaced", m.CoalescedFailures+1)
	why := append(sortedCounts(m.DimensionExhausted, "%s exhausted on %d node(s)"),
		sortedCounts(m.ConstraintFiltered, "constraint %s filtered %d node(s)")...)
	if len(why) > 0 {
		s += " (" + strings.Join(why, ", ") + ")"
	}
	return fmt.Sprintf("%s; %d of %d nodes exhausted", s, m.NodesExhausted, m.NodesEvaluated)
}

// sortedCounts renders a metric's per-dimension node counts with format.
func sortedCounts(m map[string]int, format string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, fmt.Sprintf(format, k, v))
	}
	sort.Strings(out)
	return out
}
