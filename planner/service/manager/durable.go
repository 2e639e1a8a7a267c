package manager

import (
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/planner/service/source"
)

// The caravan driver's task events (Nomad type "Driver") carry its
// annotations as details. A checkpoint saved, and one restored, carry both
// a generation and a duration: the task's state at the event's time is
// durable. A failed, skipped or stale checkpoint carries neither.
const (
	detailGeneration = "generation"
	detailDuration   = "duration"
)

// durableSince is when job j's state was last made durable: the newest
// checkpoint the caravan driver saved or restored for any of its tasks
// (their task events), or resumed, when the planner last resumed it and
// that is later (a job that started fresh has lost everything since).
// Zero when neither is known.
func durableSince(j *source.Job, resumed time.Time) time.Time {
	at := resumed
	for _, a := range j.Allocs {
		for _, ts := range a.TaskStates {
			if ts == nil {
				continue
			}
			for _, ev := range ts.Events {
				if durableEvent(ev) {
					if t := time.Unix(0, ev.Time); t.After(at) {
						at = t
					}
				}
			}
		}
	}
	return at
}

func durableEvent(ev *nomadapi.TaskEvent) bool {
	if ev == nil || ev.Type != nomadapi.TaskDriverMessage {
		return false
	}
	_, gen := ev.Details[detailGeneration]
	_, dur := ev.Details[detailDuration]
	return gen && dur
}
