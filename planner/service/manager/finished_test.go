package manager

import (
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
)

// TestManager_FinishedJobIsNeverGrown: live, a worker the planner added as
// a job took its last step found no coordinator and waited for one
// forever, so the batch job never completed. A job whose training reported
// done keeps its workers; once its parameter servers have exited, workers
// still running after strayGrace are scaled away.
func TestManager_FinishedJobIsNeverGrown(t *testing.T) {
	cases := []struct {
		name     string
		psActive bool
		after    time.Duration // since the done report, or the servers' exit
		reported bool          // the done report reached the planner
		stopped  bool
	}{
		{"coordinator still exiting", true, time.Minute, true, false},
		{"within the grace", false, strayGrace / 2, true, false},
		{"stray workers", false, 2 * strayGrace, true, true},
		// Live, the last report can come after Nomad shows the servers
		// complete: a batch job's server that exited on its own ends
		// training too.
		{"no report yet, servers exited", false, 2 * strayGrace, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, defaultSettings(), 4)
			job := fakenomad.TrainingJob("a", 1, map[string]string{
				"caravan_max_workers": "4", "caravan_ps_group": "ps", "caravan_total_steps": "1000"})
			job.Type = ptr("batch")
			ps := nomadapi.NewTaskGroup("ps", 1)
			ps.AddTask(nomadapi.NewTask("serve", "raw_exec"))
			job.AddTaskGroup(ps)
			h.nomad.PutJob(job)
			allocs := running(map[string]int{"a": 1})
			done := h.clk.Now().Add(-tc.after)
			psAlloc := &nomadapi.AllocationListStub{ID: "a-ps", Namespace: "default", JobID: "a", TaskGroup: "ps",
				NodeID: "node-0", ClientStatus: "complete", DesiredStatus: "run", ModifyTime: done.UnixNano()}
			if tc.psActive {
				psAlloc.ClientStatus = "running"
			}
			h.nomad.SetAllocs(append(allocs, psAlloc))
			deadlineAllocs(t, h, 2)
			h.measuredAt("a", 1)
			k := ingest.JobKey{Namespace: "default", ID: "a"}
			h.store.Add(k, ingest.Record{Sample: ingest.Sample{Step: 990, Loss: 0.5, StepsTotal: 1000}, Time: done.Add(-time.Second), AllocationID: "a-ps"})
			if tc.reported {
				h.store.Add(k, ingest.Record{Sample: ingest.Sample{Step: 1000, Loss: 0.4, StepsTotal: 1000, Done: true}, Time: done, AllocationID: "a-ps"})
			}

			r := h.round()
			v := findJob(t, r, "a")
			must.Eq(t, tc.reported, v.Fit.Finished)
			if !tc.stopped {
				must.Eq(t, 1, count(t, h.nomad, "a"), must.Sprintf("a finished job must not grow: %+v", r.Actions))
				must.SliceEmpty(t, r.Actions)
				must.StrContains(t, v.Detail, "training finished")
				return
			}
			// The job is stopped (a scale would make Nomad re-run its
			// completed servers), and counts as stopped.
			must.SliceLen(t, 1, r.Actions)
			must.Eq(t, KindFinish, r.Actions[0].Kind)
			must.Eq(t, StatusApplied, r.Actions[0].Status)
			must.True(t, *h.nomad.Job("default", "a").Stop)
			must.StrContains(t, r.Actions[0].Message, "training finished")
			must.Eq(t, StateStopped, findJob(t, h.round(), "a").State)
		})
	}
}
