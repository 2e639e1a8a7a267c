package manager

import (
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/planner/model"
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
	speed map[shape]float64 // newest observed steps/s per shape

	lastChange   time.Time // last planner write to the job
	refusedUntil time.Time // Nomad refused a write: do not retry before this
	lastResume   time.Time // when the job last went from 0 to >0 workers
	waitingSince time.Time // when the job last went to 0 workers
	stableSince  time.Time // since when the running shape is unchanged
	stableShape  shape

	// fit caches the last convergence fit and the newest record it saw, so
	// a round without new reports does not refit.
	fitAt  time.Time
	fitN   int
	fit    *model.Convergence
	fitErr error

	// events caches the worker group's scaling events per job modify index.
	eventsIndex uint64
	lastEvent   *nomadapi.ScalingEvent
	lastOurs    *nomadapi.ScalingEvent // newest event the planner wrote
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
