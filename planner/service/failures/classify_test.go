package failures

import (
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
)

func alloc(status string, events ...*nomadapi.TaskEvent) *nomadapi.AllocationListStub {
	return &nomadapi.AllocationListStub{ID: "a1", ClientStatus: status,
		TaskStates: map[string]*nomadapi.TaskState{"train": {Events: events}}}
}

func ev(typ string, code, signal int, details map[string]string) *nomadapi.TaskEvent {
	return &nomadapi.TaskEvent{Type: typ, ExitCode: code, Signal: signal, Details: details}
}

var driverOOM = ev(nomadapi.TaskDriverMessage, 0, 0, map[string]string{"gpu_out_of_memory": "true", "exit_code": "1"})

func TestClassify(t *testing.T) {
	started := ev(nomadapi.TaskStarted, 0, 0, nil)
	cases := []struct {
		name        string
		alloc       *nomadapi.AllocationListStub
		user, infra int
	}{
		{"clean exit", alloc("complete", started, ev(nomadapi.TaskTerminated, 0, 0, nil)), 0, 0},
		{"python exception", alloc("failed", started, ev(nomadapi.TaskTerminated, 1, 0, nil)), 1, 0},
		{"command not found", alloc("failed", started, ev(nomadapi.TaskTerminated, 127, 0, nil)), 1, 0},
		{"segfault", alloc("failed", started, ev(nomadapi.TaskTerminated, 0, 11, nil)), 1, 0},
		{"oom", alloc("failed", started, ev(nomadapi.TaskTerminated, 137, 9, map[string]string{"oom_killed": "true"})), 1, 0},
		{"tempfail", alloc("failed", started, ev(nomadapi.TaskTerminated, ExitTempFail, 0, nil)), 0, 1},
		{"unexplained sigkill", alloc("failed", started, ev(nomadapi.TaskTerminated, 137, 9, nil)), 0, 1},
		{"killed on purpose", alloc("complete", started, ev(nomadapi.TaskKilling, 0, 0, nil), ev(nomadapi.TaskTerminated, 143, 15, nil)), 0, 0},
		{"driver failure", alloc("failed", ev(nomadapi.TaskDriverFailure, 0, 0, nil)), 0, 1},
		{"bad config", alloc("failed", ev(nomadapi.TaskFailedValidation, 0, 0, nil)), 1, 0},
		{"node lost", alloc("lost", started), 0, 1},
		{"GPU OOM seen by the driver is not a user error", alloc("running", started, driverOOM, ev(nomadapi.TaskTerminated, 1, 0, nil)), 0, 0},
		{"restarts count", alloc("running", started, ev(nomadapi.TaskTerminated, 1, 0, nil), ev(nomadapi.TaskRestarting, 0, 0, nil),
			started, ev(nomadapi.TaskTerminated, 2, 0, nil)), 2, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Classify([]*nomadapi.AllocationListStub{tc.alloc})
			must.Eq(t, tc.user, r.User)
			must.Eq(t, tc.infra, r.Infrastructure)
		})
	}
}

// A user failure is out of GPU memory when its allocation reported so after
// its previous failure and before it; other failures keep their class.
func TestMarkGPUOutOfMemory(t *testing.T) {
	at := func(typ string, code int, ns int64) *nomadapi.TaskEvent {
		e := ev(typ, code, 0, nil)
		e.Time = ns
		return e
	}
	a := alloc("running", at(nomadapi.TaskStarted, 0, 10), at(nomadapi.TaskTerminated, 1, 100),
		at(nomadapi.TaskStarted, 0, 110), at(nomadapi.TaskTerminated, 1, 200),
		at(nomadapi.TaskStarted, 0, 210), at(nomadapi.TaskTerminated, 1, 300))
	cases := []struct {
		name      string
		reports   map[string][]int64
		user, oom int
	}{
		{"none", nil, 3, 0},
		{"before the second exit", map[string][]int64{"a1": {150}}, 2, 1},
		{"before the first and third", map[string][]int64{"a1": {90, 250}}, 1, 2},
		{"two reports, one exit", map[string][]int64{"a1": {120, 190}}, 2, 1},
		{"after every exit", map[string][]int64{"a1": {400}}, 3, 0},
		{"another allocation", map[string][]int64{"a2": {150}}, 3, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Classify([]*nomadapi.AllocationListStub{a})
			r.MarkGPUOutOfMemory(tc.reports)
			must.Eq(t, tc.user, r.User)
			must.Eq(t, tc.oom, r.GPUOutOfMemory)
			n := 0
			for _, f := range r.Failures {
				if f.Class == GPUOutOfMemory {
					n++
					must.StrContains(t, f.Reason, "out of GPU memory")
				}
			}
			must.Eq(t, tc.oom, n)
			r.GPUOutOfMemoryAsUser()
			must.Eq(t, 3, r.User)
			must.Eq(t, 0, r.GPUOutOfMemory)
		})
	}
}

// The caravan driver's "GPU out of memory" event (a Driver event annotated
// gpu_out_of_memory = "true") makes its run's exit a GPUOutOfMemory failure,
// whichever of the two Nomad lists first; other runs' exits, other driver
// events and exits not counted as user errors keep their class.
func TestClassify_DriverGPUOutOfMemoryEvent(t *testing.T) {
	started := ev(nomadapi.TaskStarted, 0, 0, nil)
	exit1 := ev(nomadapi.TaskTerminated, 1, 0, nil)
	other := ev(nomadapi.TaskDriverMessage, 0, 0, map[string]string{"reason": "stop"})
	for _, tc := range []struct {
		name      string
		events    []*nomadapi.TaskEvent
		user, oom int
		infra     int
	}{
		{"event, then exit", []*nomadapi.TaskEvent{started, driverOOM, exit1}, 0, 1, 0},
		{"exit, then event", []*nomadapi.TaskEvent{started, exit1, driverOOM}, 0, 1, 0},
		{"only the run it follows", []*nomadapi.TaskEvent{started, exit1, ev(nomadapi.TaskRestarting, 0, 0, nil),
			started, driverOOM, ev(nomadapi.TaskTerminated, 2, 0, nil)}, 1, 1, 0},
		{"not carried into the next run", []*nomadapi.TaskEvent{started, driverOOM, ev(nomadapi.TaskRestarting, 0, 0, nil),
			started, exit1}, 1, 0, 0},
		{"another driver event", []*nomadapi.TaskEvent{started, other, exit1}, 1, 0, 0},
		{"tempfail stays infrastructure", []*nomadapi.TaskEvent{started, driverOOM, ev(nomadapi.TaskTerminated, ExitTempFail, 0, nil)}, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Classify([]*nomadapi.AllocationListStub{alloc("running", tc.events...)})
			must.Eq(t, tc.user, r.User)
			must.Eq(t, tc.oom, r.GPUOutOfMemory)
			must.Eq(t, tc.infra, r.Infrastructure)
			if tc.oom > 0 {
				f, ok := r.Last(GPUOutOfMemory)
				must.True(t, ok)
				must.StrContains(t, f.Reason, "out of GPU memory (the caravan driver read it in the task's stderr)")
			}
		})
	}
}
