package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/planner/service/source"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

// FitChecker dry-runs a count change with Nomad's own plan
// (submit.Writer). A Writer without it starts jobs unchecked.
type FitChecker interface {
	PlanCounts(ctx context.Context, job *nomadapi.Job, counts map[string]int) (submit.Fit, error)
}

// admits runs, with team queues configured, Nomad's plan of a start or
// resume from zero before it is written: a job Nomad cannot place whole
// gets none of it (the queues admitted its whole minimum by their own
// count; Nomad's plan also sees constraints, fragmentation and what
// other schedulers hold). It reports false when the write must not go;
// the action then says why. A plan that cannot be asked (no capability,
// Nomad unreachable) does not block the start: it is noted on the action
// and the partial-gang check still guards the job.
func (m *Manager) admits(ctx context.Context, s Settings, r *Round, a *Action) bool {
	if !s.Queues.Enabled() || a.From != 0 || a.To <= 0 || a.job == nil || (a.Kind != KindStart && a.Kind != KindResume) {
		return true
	}
	fc, ok := m.cfg.Writer.(FitChecker)
	if !ok {
		return true
	}
	counts := map[string]int{a.Group: a.To}
	if a.PSGroup != "" {
		counts[a.PSGroup] = a.PSTo
	}
	fit, err := fc.PlanCounts(ctx, a.job.Job, counts)
	switch {
	case errors.Is(err, submit.ErrForbidden):
		a.Error = "fit not checked (written unchecked): " + err.Error()
		m.mu.Lock()
		if !m.planForbidden {
			m.planForbidden = true
			m.log.Error("the planner's Nomad token may not plan jobs: starts are written without Nomad's fit check",
				"job", a.Job, "error", err)
		}
		m.mu.Unlock()
		return true
	case err != nil:
		a.Error = "fit not checked (written unchecked): " + err.Error()
		m.log.Warn("nomad's plan of a start failed; writing it unchecked", "job", a.Job, "error", err)
		return true
	case fit.Fits():
		return true
	}
	a.Status = StatusDeferred
	a.Error = fmt.Sprintf("held at 0: Nomad's plan cannot place all %d workers at once (%s)", a.To, fit.Reason())
	a.verdict = VerdictNoFit
	m.log.Info("held at zero: nomad's plan does not place the job whole", "job", a.Job, "workers", a.To, "reason", fit.Reason())
	for i := range r.Jobs {
		if r.Jobs[i].Namespace == a.key.Namespace && r.Jobs[i].ID == a.key.ID {
			r.Jobs[i].Detail = a.Error
		}
	}
	return false
}

// placedAllocs counts the group's allocations Nomad has placed on a node
// and means to run (pending or running): each holds its GPUs. ended counts
// those of the job's current version that ran and ended (complete, failed,
// lost): workers that finish or fail, not a placement race.
func placedAllocs(j *source.Job, group string) (placed, ended int) {
	for _, a := range j.Allocs {
		if a.TaskGroup != group || a.DesiredStatus != "run" {
			continue
		}
		switch a.ClientStatus {
		case "running", "pending":
			placed++
		case "complete", "failed", "lost":
			if j.Job.Version != nil && a.JobVersion == *j.Job.Version {
				ended++
			}
		}
	}
	return placed, ended
}

// partialGang is the rollback of a gang (caravan_gang) that Nomad left
// partly placed for a full round: some workers hold GPUs while others of
// its minimum wait unplaced, so none of them can train. With team queues
// configured it is scaled back to zero (nil otherwise, or while it is
// whole, or for less than a round). A gang some of whose workers of this
// version ended (finished, failed, lost) is left to the failure and
// finish handling. mm.partialSince remembers when it was first seen partial.
func partialGang(now time.Time, s Settings, j *source.Job, mm *memory, v *JobView) *Action {
	if !s.Queues.Enabled() || !j.Spec.Gang || v.State != StateRunning {
		mm.partialSince = time.Time{}
		return nil
	}
	placed, ended := placedAllocs(j, j.Spec.WorkerGroup)
	need := min(v.Workers, j.Spec.MinWorkers)
	if placed == 0 || placed >= need || ended > 0 {
		mm.partialSince = time.Time{}
		return nil
	}
	if mm.partialSince.IsZero() {
		mm.partialSince = now
	}
	if now.Sub(mm.partialSince) < s.Interval {
		v.Detail = fmt.Sprintf("gang partly placed: %d of %d workers placed; rolled back if still so next round", placed, need)
		return nil
	}
	k := j.Key
	return &Action{Job: k.String(), key: k, job: j, Kind: KindGangRollback, Group: j.Spec.WorkerGroup,
		From: v.Workers, To: 0, jobModifyIndex: v.Index,
		Reason: fmt.Sprintf("gang partly placed for a full round (since %s): %d of its %d workers placed, the rest unplaced; held at 0 until the whole gang fits",
			mm.partialSince.Format(time.RFC3339), placed, need)}
}
