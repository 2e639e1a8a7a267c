package manager

import (
	"fmt"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/queue"
	"github.com/caravan-nomad/caravan/planner/rightsize"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

// gpuJob is a training job whose worker task requests shares of the gpu
// device.
func gpuJob(id string, workers int, shares uint64, meta map[string]string) *nomadapi.Job {
	job := fakenomad.TrainingJob(id, workers, meta)
	delete(job.Meta, "caravan_gpu_shares")
	job.TaskGroups[0].Tasks[0].Resources = &nomadapi.Resources{Devices: []*nomadapi.RequestedDevice{{Name: "gpu", Count: &shares}}}
	return job
}

// deviceCount is the gpu count the fake Nomad's job asks for per worker.
func deviceCount(t *testing.T, h *harness, id string) uint64 {
	t.Helper()
	return *h.nomad.Job("default", id).TaskGroups[0].Tasks[0].Resources.Devices[0].Count
}

// reportFrom adds a report of allocation alloc, a second after the last.
func (h *harness) reportFrom(id, alloc string, peak int64, oom bool) {
	h.clk.Advance(time.Second)
	h.store.Add(ingest.JobKey{Namespace: "default", ID: id}, ingest.Record{Time: h.clk.Now(), AllocationID: alloc,
		Sample: ingest.Sample{Step: 10, Loss: 1, SamplesPerSec: 100, Workers: 1, GPUMemoryPeakBytes: peak, GPUOutOfMemory: oom}})
}

// resizeEvents are the job's worker group events the planner wrote for
// resizes (applied or noted).
func resizeEvents(h *harness, id string) []nomadapi.ScalingEvent {
	var out []nomadapi.ScalingEvent
	for _, ev := range h.nomad.Events("default", id, "worker") {
		if a := eventAction(&ev); a == submit.ActionResize || a == submit.ActionResizeNote {
			out = append(out, ev)
		}
	}
	return out
}

// TestManager_AppliesRightsize: a job that declares 4 shares, opts in with
// caravan_rightsize = "apply" and uses 1 share's memory at flat throughput
// is resized to 1 share in the round its evidence is enough: one
// registration that changes the device count, then a count-less scaling
// event with the measured numbers. It is not resized again on the evidence
// it had at 4 shares (no flapping): at 1 share, new evidence agrees.
func TestManager_AppliesRightsize(t *testing.T) {
	h := newHarness(t, defaultSettings(), 0)
	gpuNodes(h, 1)
	h.nomad.PutJob(gpuJob("a", 1, 4, map[string]string{"caravan_rightsize": "apply", "caravan_max_workers": "1"}))
	h.nomad.SetAllocs(running(map[string]int{"a": 1}))
	peak := int64(8) << 30
	for i := 0; i < rightsize.MinReports-1; i++ {
		h.reportFrom("a", "a-0", peak, false)
	}
	h.round()
	must.SliceEmpty(t, h.nomad.WritesSnapshot())

	h.reportFrom("a", "a-0", peak, false)
	r := h.round()
	must.SliceLen(t, 1, r.Actions)
	a := r.Actions[0]
	must.Eq(t, KindResize, a.Kind)
	must.Eq(t, StatusApplied, a.Status, must.Sprint(a.Error))
	must.Eq(t, 4, a.Resize.From)
	must.Eq(t, 1, a.Resize.To)
	must.StrContains(t, a.Message, "GPU shares per worker 4 -> 1 (right-sizing; the job resumes from the checkpoint")
	must.Eq(t, uint64(1), deviceCount(t, h, "a"))
	must.Eq(t, 1, count(t, h.nomad, "a"))
	must.Eq(t, []string{"register default/a"}, h.nomad.WritesSnapshot())
	evs := resizeEvents(h, "a")
	must.SliceLen(t, 1, evs)
	must.Nil(t, evs[0].Count)
	n, ok := submit.EventCount(&evs[0])
	must.True(t, ok)
	must.Eq(t, int64(1), n)
	must.Eq[any](t, CauseRightsize, evs[0].Meta[metaCause])
	must.Eq[any](t, float64(4), evs[0].Meta[metaSharesFrom])
	must.Eq[any](t, float64(1), evs[0].Meta[metaSharesTo])
	must.Eq[any](t, float64(8192), evs[0].Meta[metaPeakMiB])
	must.Eq[any](t, float64(rightsize.MinReports), evs[0].Meta[metaReports])
	must.Eq[any](t, "100", evs[0].Meta[metaPerWorker])

	// The next rounds see 1 share: the evidence at 4 no longer counts.
	v := findJob(t, h.round(), "a")
	must.Eq(t, 1, v.Rightsize.CurrentShares)
	must.False(t, v.Rightsize.Enough)
	for i := 0; i < rightsize.MinReports; i++ {
		h.reportFrom("a", "a-0", peak, false)
	}
	v = findJob(t, h.round(), "a")
	must.True(t, v.Rightsize.Enough)
	must.Eq(t, 1, v.Rightsize.Shares)
	must.Nil(t, v.Resize)
	must.Eq(t, []string{"register default/a"}, h.nomad.WritesSnapshot())
}

// TestManager_RightsizeModes: the meta decides, else the job's queue's
// rightsize setting; the default only recommends. A worker group without a
// device request, and a recommendation held at a bound, are refused with
// one event each that names the reason.
func TestManager_RightsizeModes(t *testing.T) {
	queues := queue.Config{Queues: []queue.Queue{
		{Name: "apply", Namespaces: []string{"default"}, BorrowLimit: queue.Unlimited, LendLimit: queue.Unlimited, Weight: 1},
	}}
	cases := []struct {
		name    string
		job     *nomadapi.Job
		queue   string // the queue's rightsize setting ("": queues off)
		to      uint64 // the device count after the round (4: unchanged)
		refusal string
	}{
		{"default recommends", gpuJob("a", 1, 4, nil), "", 4, ""},
		{"queue applies", gpuJob("a", 1, 4, nil), "apply", 1, ""},
		{"meta recommends in an applying queue", gpuJob("a", 1, 4, map[string]string{"caravan_rightsize": "recommend"}), "apply", 4, ""},
		{"meta applies in a recommending queue", gpuJob("a", 1, 4, map[string]string{"caravan_rightsize": "apply"}), "recommend", 1, ""},
		{"min bound", gpuJob("a", 1, 4, map[string]string{"caravan_rightsize": "apply", "caravan_min_gpu_shares": "4"}), "", 4,
			"refused: right-sizing to 1 GPU share(s) per worker (now 4): "},
		{"no device request", fakenomad.TrainingJob("a", 1, map[string]string{"caravan_rightsize": "apply", "caravan_gpu_shares": "4"}), "", 4,
			"request no gpu device"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := defaultSettings()
			if tc.queue != "" {
				s.Queues = queues
				s.QueueRightsize = map[string]string{"apply": tc.queue}
			}
			h := newHarness(t, s, 0)
			gpuNodes(h, 1)
			h.nomad.PutJob(tc.job)
			h.nomad.SetAllocs(running(map[string]int{"a": 1}))
			for i := 0; i < rightsize.MinReports; i++ {
				h.reportFrom("a", "a-0", 8<<30, false)
			}
			h.round()
			h.round()
			if res := tc.job.TaskGroups[0].Tasks[0].Resources; res != nil && len(res.Devices) > 0 {
				must.Eq(t, tc.to, deviceCount(t, h, "a"))
			}
			evs := resizeEvents(h, "a")
			if tc.refusal == "" {
				if tc.to == 4 {
					must.SliceEmpty(t, evs)
				}
				return
			}
			must.SliceLen(t, 1, evs, must.Sprint("a refusal is recorded once"))
			must.StrContains(t, evs[0].Message, tc.refusal)
			must.Eq[any](t, submit.ActionResizeNote, evs[0].Meta[submit.EventMetaAction])
			must.Nil(t, evs[0].Count)
		})
	}
}

// TestManager_RegrowsAfterGPUOutOfMemory: a worker that reports running out
// of GPU memory and exits is a failure of its own class (not a user error,
// so the job is not stopped for it), and the job grows from 1 to 2 shares
// in one registration, then, out of memory again, to the GPU's 4; at 4 it
// cannot grow: the refusal is an event and its failures count as user
// errors again.
func TestManager_RegrowsAfterGPUOutOfMemory(t *testing.T) {
	h := newHarness(t, defaultSettings(), 0)
	gpuNodes(h, 1)
	h.nomad.PutJob(gpuJob("a", 1, 1, map[string]string{"caravan_max_workers": "1", "caravan_max_user_failures": "0"}))
	oomFailure := func(alloc string) {
		h.reportFrom("a", alloc, 9<<30, true)
		failed := &nomadapi.TaskEvent{Type: nomadapi.TaskTerminated, ExitCode: 1, Time: h.clk.Now().UnixNano() + 1}
		started := &nomadapi.TaskEvent{Type: nomadapi.TaskStarted, Time: h.clk.Now().UnixNano() - 1}
		h.nomad.SetAllocs([]*nomadapi.AllocationListStub{{ID: alloc, Namespace: "default", JobID: "a", TaskGroup: "worker",
			NodeID: "a", ClientStatus: "running", DesiredStatus: "run",
			TaskStates: map[string]*nomadapi.TaskState{"train": {Events: []*nomadapi.TaskEvent{started, failed}}}}})
	}
	for _, step := range []struct {
		alloc    string
		from, to uint64
	}{{"a-1", 1, 2}, {"a-2", 2, 4}} {
		oomFailure(step.alloc)
		r := h.round()
		v := findJob(t, r, "a")
		must.Eq(t, 1, v.Failures.GPUOutOfMemory, must.Sprintf("%+v %+v", v.Failures, v.Resize))
		must.Eq(t, 0, v.Failures.User)
		must.Eq(t, "gpu-out-of-memory", string(v.Failures.Failures[0].Class))
		must.SliceLen(t, 1, r.Actions)
		a := r.Actions[0]
		must.Eq(t, KindResize, a.Kind, must.Sprint(a.Reason))
		must.Eq(t, StatusApplied, a.Status, must.Sprint(a.Error))
		must.Eq(t, CauseGPUOOM, a.Resize.Cause)
		must.Eq(t, step.to, deviceCount(t, h, "a"))
		must.StrContains(t, a.Message, fmt.Sprintf("GPU shares per worker %d -> %d (regrowth after running out of GPU memory", step.from, step.to))
		h.round() // sees the new size
	}
	evs := resizeEvents(h, "a")
	must.SliceLen(t, 2, evs)
	must.Eq[any](t, float64(9216), evs[1].Meta[metaPeakMiB])

	// At the GPU's 4 shares it cannot grow: the failure is the user's.
	oomFailure("a-3")
	r := h.round()
	v := findJob(t, r, "a")
	must.Eq(t, ResizeRefused, v.Resize.Status)
	must.StrContains(t, v.Resize.Reason, "cannot grow: the GPU's 4 shares")
	must.Eq(t, 1, v.Failures.User)
	must.Eq(t, 0, v.Failures.GPUOutOfMemory)
	must.Eq(t, KindUserError, r.Actions[0].Kind)
	evs = resizeEvents(h, "a")
	must.SliceLen(t, 3, evs)
	must.StrContains(t, evs[2].Message, "refused: regrowth after running out of GPU memory to 4")
}

// TestManager_RegrowthWaitsForItsQueue: a regrowth beyond the job's queue
// guarantee waits, with an event that says why, when the job may not be
// suspended (so it may not borrow), and when it passes the queue's
// borrowing limit; within them it is applied.
func TestManager_RegrowthWaitsForItsQueue(t *testing.T) {
	cases := []struct {
		name      string
		guarantee int
		borrow    int
		meta      map[string]string
		waits     string
	}{
		{"within the guarantee", 1000, queue.Unlimited, nil, ""},
		{"borrows within the limit", 250, 500, nil, ""},
		{"may not borrow", 250, queue.Unlimited, map[string]string{"caravan_suspendable": "false"}, "may not be suspended, so it may not borrow"},
		{"beyond the borrowing limit", 250, 100, nil, "beyond its borrowing limit of 0.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := defaultSettings()
			s.Queues = queue.Config{Queues: []queue.Queue{{Name: "team", Namespaces: []string{"default"}, Guarantee: tc.guarantee,
				BorrowLimit: tc.borrow, LendLimit: queue.Unlimited, Weight: 1}}}
			h := newHarness(t, s, 0)
			gpuNodes(h, 1)
			meta := map[string]string{"caravan_max_workers": "1"}
			for k, v := range tc.meta {
				meta[k] = v
			}
			h.nomad.PutJob(gpuJob("a", 1, 1, meta))
			h.nomad.SetAllocs(running(map[string]int{"a": 1}))
			h.reportFrom("a", "a-0", 0, true)
			r := h.round()
			v := findJob(t, r, "a")
			if tc.waits == "" {
				must.Eq(t, uint64(2), deviceCount(t, h, "a"), must.Sprint(v.Resize))
				return
			}
			must.Eq(t, uint64(1), deviceCount(t, h, "a"))
			must.Eq(t, ResizeWaiting, v.Resize.Status)
			must.StrContains(t, v.Resize.Reason, tc.waits)
			h.round()
			evs := resizeEvents(h, "a")
			must.SliceLen(t, 1, evs)
			must.True(t, strings.HasPrefix(evs[0].Message, "caravan planner: waiting: regrowth"), must.Sprint(evs[0].Message))
			must.StrContains(t, evs[0].Message, tc.waits)
		})
	}
}

// TestManager_ResizeAndWorkersInOneRound: the round fixes the shares per
// worker first (right-sizing 4 -> 1) and the policy then counts workers at
// that size: on one 4-share GPU a job that held all of it in one worker
// may grow to two 1-share workers, and both changes go in one
// registration, whose event records the new worker count.
func TestManager_ResizeAndWorkersInOneRound(t *testing.T) {
	h := newHarness(t, defaultSettings(), 0)
	gpuNodes(h, 1)
	h.nomad.PutJob(gpuJob("a", 1, 4, map[string]string{"caravan_rightsize": "apply", "caravan_max_workers": "4"}))
	h.nomad.SetAllocs(running(map[string]int{"a": 1}))
	h.measuredAt("a", 1)
	for i := 0; i < rightsize.MinReports; i++ {
		h.reportFrom("a", "a-0", 8<<30, false)
	}
	r := h.round()
	must.SliceLen(t, 1, r.Actions)
	a := r.Actions[0]
	must.Eq(t, StatusApplied, a.Status, must.Sprint(a.Error))
	must.Eq(t, KindScale, a.Kind)
	must.Eq(t, 1, a.From)
	must.Greater(t, 1, a.To)
	must.Eq(t, 1, a.Resize.To)
	must.Eq(t, uint64(1), deviceCount(t, h, "a"))
	must.Eq(t, a.To, count(t, h.nomad, "a"))
	must.Eq(t, []string{"register default/a"}, h.nomad.WritesSnapshot())
	must.StrContains(t, a.Message, fmt.Sprintf("; workers 1 -> %d at the new size", a.To))
	evs := resizeEvents(h, "a")
	must.SliceLen(t, 1, evs)
	n, _ := submit.EventCount(&evs[0])
	must.Eq(t, int64(a.To), n)
	// Without the resize the GPU had no room for a second worker.
	must.Eq(t, 1000*a.To/4, r.Plan.UsedGPUMilli)
}

// TestManager_RegrowsAfterDriverSawGPUOutOfMemory: a worker that exits out
// of GPU memory without a progress report (the caravan driver read torch's
// error in its stderr and said so in an event) is regrown like one that
// reported it, once for that exit: the round after the resize, which still
// sees the old allocation's failure, does not grow the job again.
func TestManager_RegrowsAfterDriverSawGPUOutOfMemory(t *testing.T) {
	h := newHarness(t, defaultSettings(), 0)
	gpuNodes(h, 1)
	h.nomad.PutJob(gpuJob("a", 1, 1, map[string]string{"caravan_max_workers": "1", "caravan_max_user_failures": "0"}))
	now := h.clk.Now().UnixNano()
	events := []*nomadapi.TaskEvent{
		{Type: nomadapi.TaskStarted, Time: now - 3},
		{Type: nomadapi.TaskDriverMessage, Time: now - 2, DriverMessage: "GPU out of memory: the task exited with code 1",
			Details: map[string]string{"gpu_out_of_memory": "true", "exit_code": "1"}},
		{Type: nomadapi.TaskTerminated, ExitCode: 1, Time: now - 1},
	}
	h.nomad.SetAllocs([]*nomadapi.AllocationListStub{{ID: "a-1", Namespace: "default", JobID: "a", TaskGroup: "worker",
		NodeID: "a", ClientStatus: "running", DesiredStatus: "run",
		TaskStates: map[string]*nomadapi.TaskState{"train": {Events: events}}}})
	r := h.round()
	v := findJob(t, r, "a")
	must.Eq(t, 1, v.Failures.GPUOutOfMemory, must.Sprintf("%+v", v.Failures))
	must.Eq(t, 0, v.Failures.User)
	must.SliceLen(t, 1, r.Actions)
	must.Eq(t, KindResize, r.Actions[0].Kind, must.Sprint(r.Actions[0].Reason))
	must.Eq(t, CauseGPUOOM, r.Actions[0].Resize.Cause)
	must.Eq(t, uint64(2), deviceCount(t, h, "a"))

	r = h.round() // sees the new size; the old failure is answered
	r = h.round()
	for _, a := range r.Actions {
		must.NotEq(t, KindResize, a.Kind, must.Sprintf("resized twice for one failure: %s", a.Reason))
	}
	must.Eq(t, uint64(2), deviceCount(t, h, "a"))
}
