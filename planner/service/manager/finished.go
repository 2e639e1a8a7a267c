package manager

import (
	"fmt"
	"time"

	"github.com/caravan-nomad/caravan/planner/service/source"
)

// strayGrace is how long after a job's training ended its workers may still
// run before the planner scales them away. Workers that were connected exit
// within a step; one that was added just before the end (a growth racing
// the last step) finds no coordinator and would wait for one forever,
// holding its GPU and keeping the batch job from completing.
const strayGrace = 5 * time.Second

// finishedJob handles a job whose training ended (see trainingEnded): it is
// never resized again (a worker added now would find no coordinator), and
// workers still running strayGrace after the end, when the job's parameter
// servers have all exited, are stopped by stopping the job. Not by a scale:
// any new version of a batch job makes Nomad run its completed groups
// again, and a re-run coordinator starts over from its last periodic
// checkpoint with no workers. ok is false when training has not ended.
func finishedJob(now time.Time, j *source.Job, v *JobView) (stop *Action, ok bool) {
	at, ok := trainingEnded(j, v)
	if !ok {
		return nil, false
	}
	v.Detail = fmt.Sprintf("training finished at step %d: waiting for its tasks to exit", v.Fit.Step)
	if j.Spec.PSGroup == "" || v.Running == 0 || now.Sub(at) < strayGrace || activeAllocs(j, j.Spec.PSGroup) > 0 {
		return nil, true
	}
	return &Action{Job: j.Key.String(), key: j.Key, job: j, Kind: KindFinish, Group: j.Spec.WorkerGroup, From: v.Workers, To: 0,
		jobModifyIndex: v.Index,
		Reason: fmt.Sprintf("at step %d; its parameter servers exited, but %d workers still wait for a coordinator",
			v.Fit.Step, v.Running)}, true
}

// trainingEnded reports whether, and since when, the job's training is
// over: a task reported done, or, in a batch job, a worker or server
// allocation exited successfully on its own (not stopped by a scale-down),
// which only the end of training does. The second does not wait for the
// last progress report, which can reach the planner after Nomad shows the
// tasks complete.
func trainingEnded(j *source.Job, v *JobView) (time.Time, bool) {
	if v.Fit.Finished {
		return v.Fit.FinishedAt, true
	}
	if j.Job.Type == nil || *j.Job.Type != "batch" {
		return time.Time{}, false
	}
	var at time.Time
	for _, a := range j.Allocs {
		own := a.TaskGroup == j.Spec.WorkerGroup || (j.Spec.PSGroup != "" && a.TaskGroup == j.Spec.PSGroup)
		if own && a.ClientStatus == "complete" && a.DesiredStatus == "run" {
			if t := time.Unix(0, a.ModifyTime); at.IsZero() || t.Before(at) {
				at = t
			}
		}
	}
	return at, !at.IsZero()
}

// activeAllocs counts the group's allocations that run or are about to.
func activeAllocs(j *source.Job, group string) int {
	n := 0
	for _, a := range j.Allocs {
		if a.TaskGroup == group && a.DesiredStatus == "run" && (a.ClientStatus == "running" || a.ClientStatus == "pending") {
			n++
		}
	}
	return n
}
