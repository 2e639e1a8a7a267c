package manager

import (
	"fmt"
	"time"

	"github.com/caravan-nomad/caravan/planner/service/source"
)

// strayGrace is how long after a job's coordinator reported training done
// its workers may still run before the planner stops them. Workers that
// were connected exit within a step; one that was added just before the end
// (a growth racing the last step) finds no coordinator and would wait for
// one forever, holding its GPU and keeping the batch job from completing.
const strayGrace = 15 * time.Second

// finishedJob handles a running job whose training reported done: it is
// never resized again (a worker added now would find no coordinator), and
// workers still running strayGrace after the end, when the job's parameter
// servers have all exited, are stopped by scaling the worker group to 0
// (a scale, which the planner's scale-only ACL policy allows; the batch job
// then completes). ok is false when the job is not finished.
func finishedJob(now time.Time, j *source.Job, v *JobView) (stop *Action, ok bool) {
	if !v.Fit.Finished {
		return nil, false
	}
	v.Detail = fmt.Sprintf("training finished at step %d: waiting for its tasks to exit", v.Fit.Step)
	if j.Spec.PSGroup == "" || v.Running == 0 || now.Sub(v.Fit.FinishedAt) < strayGrace || activeAllocs(j, j.Spec.PSGroup) > 0 {
		return nil, true
	}
	return &Action{Job: j.Key.String(), key: j.Key, job: j, Kind: KindFinish, Group: j.Spec.WorkerGroup, From: v.Workers, To: 0,
		jobModifyIndex: v.Index,
		Reason: fmt.Sprintf("at step %d; its parameter servers exited, but %d workers still wait for a coordinator",
			v.Fit.Step, v.Running)}, true
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
