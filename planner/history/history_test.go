package history

import (
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func sec(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// stub is an allocation of group whose task started at start (never, when
// start < 0) and finished at end (0: still running), restarted in place r times.
func stub(group string, start, end float64, r uint64) *nomadapi.AllocationListStub {
	a := &nomadapi.AllocationListStub{TaskGroup: group, ClientStatus: "running", CreateTime: sec(max(start, 0)).UnixNano()}
	ts := &nomadapi.TaskState{State: "running", Restarts: r}
	if start >= 0 {
		ts.StartedAt = sec(start + float64(r)) // StartedAt moves on each restart
		ts.Events = []*nomadapi.TaskEvent{{Type: nomadapi.TaskStarted, Time: sec(start).UnixNano()}}
	} else {
		ts.State, a.ClientStatus = "pending", "pending"
	}
	if end > 0 {
		ts.State, ts.FinishedAt, a.ClientStatus = "dead", sec(end), "complete"
	}
	a.TaskStates = map[string]*nomadapi.TaskState{"train": ts}
	return a
}

func TestAllocs_AttainedAndRestarts(t *testing.T) {
	cases := []struct {
		name     string
		allocs   []*nomadapi.AllocationListStub
		now      float64
		attained float64
		restarts int
	}{
		{"one running", []*nomadapi.AllocationListStub{stub("w", 10, 0, 0)}, 110, 100, 0},
		{"scale up is one restart", []*nomadapi.AllocationListStub{
			stub("w", 0, 0, 0), stub("w", 100, 0, 0), stub("w", 105, 0, 0)}, 200, 200 + 100 + 95, 1},
		{"scale down is a restart", []*nomadapi.AllocationListStub{
			stub("w", 0, 0, 0), stub("w", 0, 50, 0)}, 100, 150, 1},
		{"replaced allocation is one restart", []*nomadapi.AllocationListStub{
			stub("w", 0, 40, 0), stub("w", 45, 0, 0)}, 100, 95, 1},
		{"replaced late is still one restart", []*nomadapi.AllocationListStub{
			stub("w", 0, 40, 0), stub("w", 90, 0, 0)}, 100, 50, 1},
		{"rapid reshapes do not chain into one", []*nomadapi.AllocationListStub{
			stub("w", 0, 15, 0), stub("w", 0, 0, 0), stub("w", 30, 0, 0), stub("w", 45, 0, 0)}, 60, 15 + 60 + 30 + 15, 3},
		{"suspend is none, resume is one", []*nomadapi.AllocationListStub{
			stub("w", 0, 60, 0), stub("w", 300, 0, 0)}, 400, 160, 1},
		{"finished job", []*nomadapi.AllocationListStub{stub("w", 0, 60, 0)}, 400, 60, 0},
		{"task restarts count, from the first start", []*nomadapi.AllocationListStub{stub("w", 0, 0, 2)}, 100, 100, 2},
		{"never started holds nothing", []*nomadapi.AllocationListStub{stub("w", 0, 0, 0), stub("w", -1, 0, 0)}, 100, 100, 0},
		{"other groups are ignored", []*nomadapi.AllocationListStub{stub("w", 0, 0, 0), stub("ps", 50, 0, 0)}, 100, 100, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := FromAllocs(tc.allocs, "w", 1000)
			must.Eq(t, tc.attained, h.Attained(sec(tc.now)))
			must.Eq(t, tc.restarts, h.Restarts(sec(tc.now)))
		})
	}
}

func TestAllocs_SharesCountInGPUs(t *testing.T) {
	h := FromAllocs([]*nomadapi.AllocationListStub{stub("w", 0, 0, 0)}, "w", 250)
	must.Eq(t, 25.0, h.Attained(sec(100)))
}

func TestLive_SubmittedIsTheFirstKnown(t *testing.T) {
	moved := sec(500).UnixNano() // a scale re-registered the job
	l := Live{ID: "default/a", Group: "w", GPUMilli: 1000, Workers: 1, Job: &nomadapi.Job{SubmitTime: &moved},
		Allocs: []*nomadapi.AllocationListStub{stub("w", 20, 0, 0)}}
	rec, _ := l.Record(sec(120))
	must.Eq(t, sec(20), rec.Submitted)
	pj := rec.Job()
	must.Eq(t, 100*time.Second, pj.Age)
	must.Eq(t, 100.0, pj.AttainedService)
	must.Eq(t, 1, pj.Current.Workers)
}

// TestLive_SubmittedSurvivesMoreScalesThanNomadKeeps: after 8 scales (Nomad
// keeps 6 versions; the job's SubmitTime is the last scale's) and workers
// added and removed on the way, the job is still counted from its first
// allocation, not from its last scale.
func TestLive_SubmittedSurvivesMoreScalesThanNomadKeeps(t *testing.T) {
	lastScale := sec(20 + 8*10).UnixNano()
	allocs := []*nomadapi.AllocationListStub{stub("w", 20, 50, 0)}
	for i := 1; i <= 8; i++ {
		allocs = append(allocs, stub("w", float64(20+10*i), 0, 0))
	}
	l := Live{ID: "default/a", Group: "w", GPUMilli: 1000, Workers: 2, Job: &nomadapi.Job{SubmitTime: &lastScale}, Allocs: allocs}
	rec, _ := l.Record(sec(130))
	must.Eq(t, sec(20), rec.Submitted)
	must.Eq(t, 110*time.Second, rec.Job().Age)
}
