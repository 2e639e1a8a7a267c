package manager

import (
	"context"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/planner/model"
	"github.com/caravan-nomad/caravan/planner/service/failures"
	"github.com/caravan-nomad/caravan/planner/service/source"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

// State is what the manager concluded a managed job is doing.
type State string

const (
	StateRunning   State = "running"   // the planner may resize it
	StateQueued    State = "queued"    // opted in, waiting for its first workers
	StateSuspended State = "suspended" // the planner scaled it to 0 (time-slicing); it will resume
	StatePaused    State = "paused"    // a user scaled it to 0: left alone
	StateHeld      State = "held"      // stopped by the planner after repeated user errors
	StateStopped   State = "stopped"   // stopped (by the planner at convergence, or a user)
	StateInvalid   State = "invalid"   // its planner meta is invalid: left alone
)

// memory is what the manager remembers about a job between rounds. After a
// leader change it is rebuilt from the job's scaling events.
type memory struct {
	speed map[shape]float64 // newest observed steps/s per shape, this job's own (never pooled)
	grads gradStats         // newest reported gradient statistics
	size  sizeMemory        // right-sizing's evidence (rightsize.go)
	pack  packMemory        // live packing's measurements (packing_inputs.go)

	lastChange   time.Time // last planner write to the job
	refusedUntil time.Time // Nomad refused a write: do not retry before this
	lastResume   time.Time // when the job last went from 0 to >0 workers
	waitingSince time.Time // when the job last went to 0 workers
	stableSince  time.Time // since when the running shape is unchanged
	stableShape  shape
	// stableCounts are the group counts (workers, parameter servers) and
	// running workers stableShape was seen with: a change restarts the
	// speed window even while the reported shape still lags it.
	stableCounts [3]int
	// partialSince is when a gang was first seen partly placed (zero
	// while it is whole).
	partialSince time.Time

	// fit caches the last convergence fit and the newest record it saw, so
	// a round without new reports does not refit.
	fitAt  time.Time
	fitN   int
	fit    *model.Convergence
	fitErr error

	// events caches the worker group's scaling events per job modify index,
	// re-read for eventsSettle after the index moves (eventsIndexAt).
	eventsIndex   uint64
	eventsIndexAt time.Time
	lastEvent     *nomadapi.ScalingEvent
	lastOurs      *nomadapi.ScalingEvent // newest event the planner wrote
	// probes counts the job versions the planner's scale-index probe wrote
	// (submit/scaleindex.go): a job at version <= probes was never changed
	// by anyone but that probe.
	probes int
}

func eventAction(ev *nomadapi.ScalingEvent) string {
	if ev == nil || ev.Meta == nil {
		return ""
	}
	s, _ := ev.Meta[submit.EventMetaAction].(string)
	return s
}

func eventTime(ev *nomadapi.ScalingEvent) time.Time {
	if ev == nil {
		return time.Time{}
	}
	return time.Unix(0, int64(ev.Time))
}

// priors keeps convergence models of finished jobs by kind, for cold starts.
type priors map[string]model.Convergence

// eventsSettle is how long a job's scaling events are read again after its
// modify index moved: Nomad before 1.8 records a scale's event in a raft
// entry of its own, after the job's, so a read between the two misses it.
const eventsSettle = 30 * time.Second

// refreshEvents reads a job's scaling events when its index moved, and
// again each round for eventsSettle after that.
func (m *Manager) refreshEvents(ctx context.Context, now time.Time, j *source.Job, mm *memory) error {
	idx := uint64(0)
	if j.Job.JobModifyIndex != nil {
		idx = *j.Job.JobModifyIndex
	}
	if idx != mm.eventsIndex || mm.eventsIndex == 0 {
		mm.eventsIndexAt = now
	} else if now.Sub(mm.eventsIndexAt) > eventsSettle {
		return nil
	}
	st, err := m.cfg.Source.ScaleStatus(ctx, j.Key)
	if err != nil {
		return err
	}
	mm.eventsIndex = idx
	mm.lastEvent, mm.lastOurs, mm.probes = nil, nil, 0
	for _, g := range st.TaskGroups {
		for i := range g.Events {
			if _, probe := g.Events[i].Meta[submit.EventMetaProbe]; probe {
				mm.probes++
			}
		}
	}
	tg, ok := st.TaskGroups[j.Spec.WorkerGroup]
	if !ok {
		return nil
	}
	for i := range tg.Events {
		ev := &tg.Events[i]
		if _, ok := submit.EventCount(ev); !ok {
			// non-count events (e.g. autoscaler errors), and the probe
			// of Nomad's scale index checks (submit/scaleindex.go)
			continue
		}
		if mm.lastEvent == nil || ev.Time > mm.lastEvent.Time {
			mm.lastEvent = ev
		}
		if eventAction(ev) != "" && (mm.lastOurs == nil || ev.Time > mm.lastOurs.Time) {
			mm.lastOurs = ev
		}
	}
	// After a leader change, the events say when the planner last acted.
	if t := eventTime(mm.lastOurs); t.After(mm.lastChange) {
		mm.lastChange = t
	}
	return nil
}

// classify decides a job's state from Nomad's view and the events.
func classify(j *source.Job, mm *memory, rep failures.Report) (State, string) {
	if j.SpecErr != nil {
		return StateInvalid, j.SpecErr.Error()
	}
	if j.Stopped() {
		return StateStopped, "job is stopped"
	}
	count := j.Count(j.Spec.WorkerGroup)
	if count > 0 && j.Job.Status != nil && *j.Job.Status == "dead" {
		// A batch job whose allocations all completed: its count stays,
		// but it holds nothing and will run no more.
		return StateStopped, "job is complete (Nomad status dead)"
	}
	if count > 0 {
		return StateRunning, ""
	}
	last := mm.lastEvent
	switch eventAction(last) {
	case submit.ActionUserError:
		return StateHeld, last.Message
	case submit.ActionSuspend, submit.ActionGangRollback:
		return StateSuspended, last.Message
	case submit.ActionConverged:
		return StateStopped, last.Message
	case "":
		if last != nil {
			return StatePaused, "scaled to 0 by someone else: " + last.Message
		}
		// Version 0, or only the planner's scale-index probe since.
		if j.Job.Version != nil && *j.Job.Version <= uint64(mm.probes) {
			return StateQueued, "submitted with 0 workers"
		}
		return StatePaused, "0 workers set by the job's author"
	}
	// Our last event put it at >0 yet it is at 0: someone else did that.
	return StatePaused, "scaled to 0 outside the planner"
}

func runningAllocs(j *source.Job, group string) (n int, nodes map[string]int) {
	nodes = map[string]int{}
	for _, a := range j.Allocs {
		if a.TaskGroup == group && a.ClientStatus == "running" && a.DesiredStatus == "run" {
			n++
			nodes[a.NodeID]++
		}
	}
	return n, nodes
}
