package planner

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

// driverEvents are the caravan driver's task events of the job's task in
// group (newest allocations first) whose message starts with prefix.
func (j *nsJob) driverEvents(group, prefix string) []string {
	var out []string
	for _, stub := range j.allocs() {
		if stub.TaskGroup != group {
			continue
		}
		for task, ts := range stub.TaskStates {
			if ts == nil {
				continue
			}
			for _, ev := range ts.Events {
				if ev.Type == nomadapi.TaskDriverMessage && strings.HasPrefix(ev.DisplayMessage, prefix) {
					if strings.HasPrefix(ev.DisplayMessage, "Checkpoint saved") || strings.HasPrefix(ev.DisplayMessage, "Checkpoint restored") {
						// The planner's "progress lost" reads these details.
						must.MapContainsKeys(j.t, ev.Details, []string{"generation", "duration"})
					}
					out = append(out, fmt.Sprintf("%s/%s: %s", stub.Name, task, ev.DisplayMessage))
				}
			}
		}
	}
	return out
}

// reclaimEvents are the planner's scaling events on group that name the
// queue that reclaimed the job's GPUs (meta caravan_reclaimed_by).
func (j *nsJob) reclaimEvents(group, queue string) []nomadapi.ScalingEvent {
	st, _, err := j.c.Nomad.Jobs().ScaleStatus(j.id, &nomadapi.QueryOptions{Namespace: j.ns})
	must.NoError(j.t, err)
	var out []nomadapi.ScalingEvent
	if tg, ok := st.TaskGroups[group]; ok {
		for _, ev := range tg.Events {
			if by, _ := ev.Meta["caravan_reclaimed_by"].(string); by == queue {
				out = append(out, ev)
			}
		}
	}
	return out
}

// TestPlanner_QueueReclaimSuspend: reclaim by checkpoint-suspend on the
// real cluster. Two namespaces with a 2-GPU guarantee each on 4 SIMULATED
// GPUs; team B's train-elastic job (a parameter-server group and a worker
// group) needs all 4 workers (minimum = maximum = 4), so it borrows A's
// idle GPUs and cannot shrink. Team A submits a 2-worker job: the planner
// scales both of B's groups to 0 (the caravan driver commits the
// coordinator's state on stop), naming team-a in the scaling events; A
// starts. Reclaim time (A's submit to A's first step) is logged beside a
// plain start on the idle cluster in the same run. When A ends, B resumes
// (both groups, from the checkpoint) and ends with the parameters of one
// uninterrupted process. Compute is MODELLED (1 ms per sample sleeps).
func TestPlanner_QueueReclaimSuspend(t *testing.T) {
	c := harness.Cluster(t)
	teamNamespaces(t, c)
	p := startPlanner(t, c, "reclaim-suspend", queuesConfig)
	p.waitLeading(t)
	run := time.Now().Unix() % 1000000

	// A plain start on the idle cluster: submit to first step.
	plainStart := plainStartTime(t, c, fmt.Sprintf("splain-%d", run))

	// Team B borrows A's idle GPUs with a job that cannot shrink.
	const stepsB = 1500
	want := referenceHash(stepsB)
	b := submitElastic(t, c, "team-b", fmt.Sprintf("sb-%d", run), stepsB, 4, 4, logEvery1)
	coB := b.coordinator(time.Minute)
	b.waitWorkers("all 4 (2 borrowed from team A)", 2*time.Minute, func(n int) bool { return n == 4 })
	b.waitLog(coB, firstStepRe, time.Minute)

	// Team A submits a 2-worker job: B is checkpoint-suspended, A starts.
	a := submitElastic(t, c, "team-a", fmt.Sprintf("sa-%d", run), 200, 2, 2, logEvery1)
	tA := time.Now()
	coA := a.coordinator(2 * time.Minute)
	_, seen := a.waitLog(coA, firstStepRe, 2*time.Minute)
	reclaim := seen.Sub(tA)
	harness.Eventually(t, time.Minute, func() error {
		if n := b.live(""); n != 0 {
			return fmt.Errorf("team B's job still has %d live allocations", n)
		}
		return nil
	})
	stepAt := ""
	harness.Eventually(t, 30*time.Second, func() error {
		saved := b.driverEvents("ps", "Checkpoint saved (stop)")
		if len(saved) == 0 {
			return fmt.Errorf("no checkpoint on stop of team B's coordinator: %v", b.driverEvents("ps", ""))
		}
		stepAt = saved[0]
		return nil
	})
	for _, g := range []string{"worker", "ps"} {
		evs := b.reclaimEvents(g, "team-a")
		must.SliceNotEmpty(t, evs, must.Sprintf("no scaling event on team B's %s group naming team-a", g))
		must.StrContains(t, evs[0].Message, "reclaimed by queue team-a")
		// A count-less event with meta caravan_count where the agent
		// ignores a scale's index (Nomad before 1.8.2).
		count, ok := submit.EventCount(&evs[0])
		must.True(t, ok, must.Sprintf("team B's %s reclaim event carries no count", g))
		must.Eq(t, int64(0), count)
	}
	t.Logf("reclaim: team A's submit to its first step %s; plain start on the idle cluster %s; team B suspended (%s)",
		reclaim.Round(100*time.Millisecond), plainStart.Round(100*time.Millisecond), stepAt)

	// A ends; B resumes both groups from its checkpoint and ends bit for bit.
	a.waitLog(coA, finalLineRe, 2*time.Minute)
	tEnd := time.Now()
	coB2 := b.coordinator(2 * time.Minute)
	must.NotEq(t, coB, coB2, must.Sprint("team B's coordinator was not replaced by the resume"))
	log, _ := b.waitLog(coB2, finalLineRe, 3*time.Minute)
	restored := b.driverEvents("ps", "Checkpoint restored")
	must.SliceNotEmpty(t, restored, must.Sprint("team B's resumed coordinator restored no checkpoint"))
	m := finalLineRe.FindStringSubmatch(log)
	must.Eq(t, strconv.Itoa(stepsB), m[1])
	must.Eq(t, <-want, m[2], must.Sprint("team B's final parameters differ from one uninterrupted process"))
	t.Logf("team A ended; team B resumed (%s) and ended %s later at step %s, params_sha256 %s… equal to the uninterrupted run",
		restored[0], time.Since(tEnd).Round(time.Second), m[1], m[2][:16])
}
