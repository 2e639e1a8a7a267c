// Package failures tells user errors from infrastructure errors in a job's
// allocations (Philly's lesson: most failed DL jobs fail for user reasons and
// fail again when re-run, wasting GPUs), from task events and exit codes.
package failures

import (
	"fmt"
	"sort"
	"strconv"

	nomadapi "github.com/hashicorp/nomad/api"
)

// Class is what kind of failure a task event shows.
type Class string

const (
	// User failures come from the job itself (bad code, bad config, its own
	// out-of-memory): re-running will fail again.
	User Class = "user"
	// Infrastructure failures come from the cluster (lost node, driver or
	// hook failure, a kill nobody asked for): re-running may succeed.
	Infrastructure Class = "infrastructure"
	// GPUOutOfMemory failures are the job's GPU running out of memory, as
	// its own progress report said just before it exited (MarkGPUOutOfMemory)
	// or the caravan driver's event says (driverSawGPUOOM): a failure class
	// of its own, since more GPU shares cure it.
	GPUOutOfMemory Class = "gpu-out-of-memory"
)

// Failure is one classified failure.
type Failure struct {
	Class        Class  `json:"class"`
	AllocationID string `json:"allocation_id"`
	Task         string `json:"task,omitempty"`
	ExitCode     int    `json:"exit_code,omitempty"`
	Signal       int    `json:"signal,omitempty"`
	Reason       string `json:"reason"`
	Time         int64  `json:"time"`
}

// Report sums up a job's failures.
type Report struct {
	User           int       `json:"user"`
	Infrastructure int       `json:"infrastructure"`
	GPUOutOfMemory int       `json:"gpu_out_of_memory,omitempty"`
	Failures       []Failure `json:"failures,omitempty"` // newest first
}

// Last returns the newest failure of a class.
func (r Report) Last(c Class) (Failure, bool) {
	for _, f := range r.Failures {
		if f.Class == c {
			return f, true
		}
	}
	return Failure{}, false
}

// Exit codes by convention. A task can say "not my fault, retry me" with
// ExitTempFail (sysexits EX_TEMPFAIL), documented in planner/README.md.
const (
	ExitTempFail = 75
)

// userExit reports whether an exit code (or a signal) is the job's own doing:
// ordinary errors (1, 2), usage errors (64-78 except EX_TEMPFAIL), command not
// found or not executable (126, 127) and crashes by SIGSEGV, SIGABRT, SIGFPE,
// SIGILL or SIGBUS.
func userExit(code, signal int) bool {
	switch signal {
	case 4, 6, 7, 8, 11: // SIGILL, SIGABRT, SIGBUS, SIGFPE, SIGSEGV
		return true
	case 0:
	default:
		return false // killed by SIGKILL/SIGTERM we did not ask for
	}
	switch {
	case code == ExitTempFail:
		return false
	case code == 1 || code == 2 || code == 126 || code == 127:
		return true
	case code >= 64 && code <= 78:
		return true
	case code == 128+4 || code == 128+6 || code == 128+7 || code == 128+8 || code == 128+11:
		return true // shells report signals as 128+n
	}
	return false
}

// Classify reads a job's allocations and returns its failures.
func Classify(allocs []*nomadapi.AllocationListStub) Report {
	var r Report
	for _, a := range allocs {
		if a.ClientStatus == "lost" {
			r.add(Failure{Class: Infrastructure, AllocationID: a.ID, Reason: "allocation lost (node down or disconnected)", Time: a.ModifyTime})
		}
		tasks := make([]string, 0, len(a.TaskStates))
		for name := range a.TaskStates {
			tasks = append(tasks, name)
		}
		sort.Strings(tasks)
		for _, name := range tasks {
			ts := a.TaskStates[name]
			if ts == nil {
				continue
			}
			killing := false
			var gpuOOM *nomadapi.TaskEvent // the driver's event of this run
			exit := -1                     // this run's exit failure in r.Failures
			for _, ev := range ts.Events {
				if ev == nil {
					continue
				}
				if driverSawGPUOOM(ev) {
					gpuOOM = ev
					r.markDriverGPUOOM(exit, gpuOOM)
					continue
				}
				f, ok := classifyEvent(ev, killing)
				switch ev.Type {
				case nomadapi.TaskKilling, nomadapi.TaskSignaling, nomadapi.TaskRestartSignal:
					killing = true
				case nomadapi.TaskStarted:
					killing, gpuOOM, exit = false, nil, -1
				}
				if !ok {
					continue
				}
				f.AllocationID, f.Task, f.Time = a.ID, name, ev.Time
				r.add(f)
				if ev.Type == nomadapi.TaskTerminated {
					exit = len(r.Failures) - 1
					r.markDriverGPUOOM(exit, gpuOOM)
				}
			}
		}
	}
	sort.SliceStable(r.Failures, func(i, j int) bool { return r.Failures[i].Time > r.Failures[j].Time })
	return r
}

func (r *Report) add(f Failure) {
	r.Failures = append(r.Failures, f)
	r.count(f.Class, 1)
}

func (r *Report) count(c Class, n int) {
	switch c {
	case User:
		r.User += n
	case GPUOutOfMemory:
		r.GPUOutOfMemory += n
	default:
		r.Infrastructure += n
	}
}

// MarkGPUOutOfMemory reclassifies as GPUOutOfMemory each user failure of an
// allocation that reported running out of GPU memory (oomReports: report
// times in Unix nanoseconds, by allocation ID) after its previous failure
// and no later than this one: the exit that followed the report.
func (r *Report) MarkGPUOutOfMemory(oomReports map[string][]int64) {
	if len(oomReports) == 0 {
		return
	}
	// Failures are newest first: walk each allocation's oldest first.
	prev := map[string]int64{}
	for i := len(r.Failures) - 1; i >= 0; i-- {
		f := &r.Failures[i]
		after := prev[f.AllocationID]
		prev[f.AllocationID] = f.Time
		if f.Class != User {
			continue
		}
		for _, at := range oomReports[f.AllocationID] {
			if at > after && at <= f.Time {
				r.count(User, -1)
				f.Class = GPUOutOfMemory
				f.Reason = "out of GPU memory (the task reported torch's OutOfMemoryError): " + f.Reason
				r.count(GPUOutOfMemory, 1)
				break
			}
		}
	}
}

// driverSawGPUOOM reports whether ev is the caravan driver's "GPU out of
// memory" event: a Driver event whose details (the driver's annotations)
// say gpu_out_of_memory = "true". The driver emits it when a task exits
// non-zero with a CUDA out-of-memory error in its stderr, before the exit.
func driverSawGPUOOM(ev *nomadapi.TaskEvent) bool {
	oom, _ := strconv.ParseBool(ev.Details["gpu_out_of_memory"])
	return ev.Type == nomadapi.TaskDriverMessage && oom
}

// markDriverGPUOOM reclassifies failure i (a run's exit; -1: none yet) as
// GPUOutOfMemory when the driver saw that run run out of GPU memory (ev
// non-nil) and the exit was a user failure.
func (r *Report) markDriverGPUOOM(i int, ev *nomadapi.TaskEvent) {
	if i < 0 || ev == nil || r.Failures[i].Class != User {
		return
	}
	f := &r.Failures[i]
	r.count(User, -1)
	f.Class = GPUOutOfMemory
	f.Reason = "out of GPU memory (the caravan driver read it in the task's stderr): " + f.Reason
	r.count(GPUOutOfMemory, 1)
}

// GPUOutOfMemoryAsUser counts the GPU out-of-memory failures as user
// errors again: for a job whose shares cannot grow, more of the same
// fails again.
func (r *Report) GPUOutOfMemoryAsUser() {
	for i := range r.Failures {
		if r.Failures[i].Class == GPUOutOfMemory {
			r.Failures[i].Class = User
		}
	}
	r.User += r.GPUOutOfMemory
	r.GPUOutOfMemory = 0
}

// classifyEvent classifies one task event; killing says a stop or signal was
// requested before it, so a non-zero exit is expected and not a failure.
func classifyEvent(ev *nomadapi.TaskEvent, killing bool) (Failure, bool) {
	switch ev.Type {
	case nomadapi.TaskFailedValidation:
		return Failure{Class: User, Reason: "task failed validation: " + msg(ev)}, true
	case nomadapi.TaskArtifactDownloadFailed:
		return Failure{Class: User, Reason: "artifact download failed: " + msg(ev)}, true
	case nomadapi.TaskDriverFailure:
		return Failure{Class: Infrastructure, Reason: "driver failure: " + msg(ev)}, true
	case nomadapi.TaskSetupFailure:
		return Failure{Class: Infrastructure, Reason: "setup failure: " + msg(ev)}, true
	case "Task hook failed":
		return Failure{Class: Infrastructure, Reason: "task hook failed: " + msg(ev)}, true
	case nomadapi.TaskTerminated:
		if oom, _ := strconv.ParseBool(ev.Details["oom_killed"]); oom {
			// Philly counts out-of-memory as the job's own error: it asked
			// for less memory than it uses.
			return Failure{Class: User, ExitCode: ev.ExitCode, Signal: ev.Signal, Reason: "out of memory (raise the task's memory or lower the batch size)"}, true
		}
		if ev.ExitCode == 0 && ev.Signal == 0 {
			return Failure{}, false
		}
		if killing {
			return Failure{}, false
		}
		if userExit(ev.ExitCode, ev.Signal) {
			return Failure{Class: User, ExitCode: ev.ExitCode, Signal: ev.Signal,
				Reason: fmt.Sprintf("exited with code %d signal %d", ev.ExitCode, ev.Signal)}, true
		}
		return Failure{Class: Infrastructure, ExitCode: ev.ExitCode, Signal: ev.Signal,
			Reason: fmt.Sprintf("exited with code %d signal %d (not a user error code)", ev.ExitCode, ev.Signal)}, true
	}
	return Failure{}, false
}

func msg(ev *nomadapi.TaskEvent) string {
	for _, s := range []string{ev.DisplayMessage, ev.Message, ev.DriverError, ev.SetupError, ev.ValidationError, ev.DownloadError} {
		if s != "" {
			return s
		}
	}
	return ev.Type
}
