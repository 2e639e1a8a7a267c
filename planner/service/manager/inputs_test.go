package manager

import (
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/model"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
)

// allocAt is a worker allocation of job id whose task started at start and,
// when end is not zero, finished then; restarts are in-place restarts.
func allocAt(id, alloc string, start, end time.Time, restarts uint64) *nomadapi.AllocationListStub {
	ts := &nomadapi.TaskState{State: "running", StartedAt: start, Restarts: restarts,
		Events: []*nomadapi.TaskEvent{{Type: nomadapi.TaskStarted, Time: start.UnixNano()}}}
	a := &nomadapi.AllocationListStub{ID: alloc, Namespace: "default", JobID: id, TaskGroup: "worker", NodeID: "node-0",
		ClientStatus: "running", DesiredStatus: "run", CreateTime: start.UnixNano(), TaskStates: map[string]*nomadapi.TaskState{"train": ts}}
	if !end.IsZero() {
		ts.State, ts.FinishedAt, a.ClientStatus, a.DesiredStatus = "dead", end, "complete", "stop"
	}
	return a
}

// TestManager_TimeSlicingWithRestartHistory: a job whose allocation history
// shows restarts (a replaced allocation, in-place task restarts) is told
// them, and Gandiva time-slicing still suspends it after its quantum and
// resumes it after the other job's. (The policies that queue by Submitted
// honour the quantum; goodput orders by its own objective, restarts or not.)
func TestManager_TimeSlicingWithRestartHistory(t *testing.T) {
	for _, pol := range []string{"optimus", "fifo"} {
		t.Run(pol, func(t *testing.T) {
			s := defaultSettings()
			s.Policy.Name, s.Cooldown, s.SuspendQuantum = pol, time.Minute, 5*time.Minute
			h := newHarness(t, s, 1)
			gang := map[string]string{"caravan_min_workers": "2", "caravan_max_workers": "2", "caravan_gang": "true"}
			h.nomad.PutJob(fakenomad.TrainingJob("a", 2, gang))
			h.nomad.PutJob(fakenomad.TrainingJob("b", 0, gang))
			now := h.clk.Now()
			h.nomad.SetAllocs([]*nomadapi.AllocationListStub{
				allocAt("a", "a-0", now.Add(-10*time.Minute), now.Add(-8*time.Minute), 0), // failed, replaced
				allocAt("a", "a-1", now.Add(-8*time.Minute+10*time.Second), time.Time{}, 3),
				allocAt("a", "a-2", now.Add(-10*time.Minute), time.Time{}, 0),
			})
			deadlineAllocs(t, h, 3)

			r := h.round()
			a := findJob(t, r, "a")
			must.NotNil(t, a.History)
			must.Eq(t, 1+3, a.History.Restarts) // one replacement, three task restarts
			must.Eq(t, 3, a.History.TaskRestarts)
			must.Eq(t, 120+470+600, a.History.AttainedGPUSeconds*2) // half a GPU each (2 of 4 shares)
			must.SliceEmpty(t, r.Actions)

			h.clk.Advance(6 * time.Minute)
			r = h.round()
			kinds := []Kind{}
			for _, act := range r.Actions {
				kinds = append(kinds, act.Kind)
			}
			must.Eq(t, []Kind{KindSuspend, KindStart}, kinds)
			h.round()
			h.clk.Advance(6 * time.Minute)
			r = h.round()
			kinds = kinds[:0]
			for _, act := range r.Actions {
				kinds = append(kinds, act.Kind)
			}
			must.Eq(t, []Kind{KindSuspend, KindResume}, kinds)
			must.Eq(t, 2, count(t, h.nomad, "a"))
		})
	}
}

// TestManager_ReportedGradStatsReachTheModel: the newest reported gradient
// statistics are shown and, for a job whose global batch grows with its
// workers, make the goodput policy's speed model predict less than linear
// gain from a larger, less efficient batch.
func TestManager_ReportedGradStatsReachTheModel(t *testing.T) {
	var g gradStats
	g.observe([]ingest.Record{
		{Sample: ingest.Sample{BatchSize: 64, Workers: 1, GradSqr: 1, GradVar: 4}},
		{Sample: ingest.Sample{BatchSize: 128, Workers: 2}}, // a window without statistics keeps the last
	})
	must.Eq(t, 1.0, g.sqr)
	must.Eq(t, 4.0, g.variance)
	must.Eq(t, 64.0, g.batch)
	linear := policy.SpeedFunc(func(s policy.Shape) float64 { return 10 }) // steps/s, any size
	sm := g.goodput(linear, 128)
	// gain(s) = (4+1)/(4/s+1): gain(2) = 5/3, gain(4) = 5/2.
	must.Eq(t, 10*model.Gain(1, 4, 4)/model.Gain(1, 4, 2), sm.Rate(policy.Shape{Workers: 4, Nodes: 1}))
	must.Eq(t, 10.0, sm.Rate(policy.Shape{Workers: 2, Nodes: 1}))

	// A fixed global batch: the factor is 1 at every size.
	var fixed gradStats
	fixed.observe([]ingest.Record{
		{Sample: ingest.Sample{BatchSize: 64, Workers: 1, GradSqr: 1, GradVar: 4}},
		{Sample: ingest.Sample{BatchSize: 64, Workers: 2, GradSqr: 1, GradVar: 4}},
	})
	must.Eq(t, 10.0, fixed.goodput(linear, 64).Rate(policy.Shape{Workers: 4, Nodes: 1}))
}
