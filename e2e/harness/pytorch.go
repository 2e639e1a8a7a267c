package harness

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
)

// The elastic PyTorch jobspecs (jobspecs/train-pytorch-elastic*.nomad.hcl):
// their worker group and task, and what their logs say. Shared by e2e/driver
// (the host processes) and e2e/containers (the same job as containers).
const (
	PyTorchWorkerGroup = "worker"
	PyTorchTask        = "train"

	// PyTorchLossTolerance bounds |eval loss of an elastic run - eval loss of
	// the uninterrupted one|. The runs are the same computation in exact
	// arithmetic (each rank's loss is scaled so that DDP's mean of the
	// gradients is the global batch's mean gradient, whatever the world
	// size), but a different world size sums the batch in a different order
	// (per-rank partial sums, then gloo's allreduce), so float32 rounding
	// differs from the first step at a new world size on, and SGD with
	// momentum carries it on: the parameters are not bit for bit equal.
	// Measured (6000 steps, 1 -> 2 -> 1 workers, on the cluster and by hand):
	// the eval losses agreed to about 4e-9 in earlier runs, but differed by
	// 2.9e-5 in the two runs of 2026-11-24 (world size changes at steps
	// 1093/1508 and 1101/1510), both with the stopped worker answering with
	// a skip marker (saved=false). The same offset at different steps looks
	// systematic, not like rounding: an open question (optimizer or data
	// state across that path), not yet explained. Stopping 10 steps short
	// changes the eval loss by 1.1e-3, about 1.1e-4 a step, so 5e-5 still
	// catches a single lost or repeated step.
	PyTorchLossTolerance = 5e-5
)

// StepLine is a kind of log line that names a step and a world size.
type StepLine struct {
	re          *regexp.Regexp
	step, world int // submatch indexes
}

var (
	// PyTorchStep is rank 0's progress line.
	PyTorchStep = StepLine{regexp.MustCompile(`(?m)^step=(\d+) loss=\S+ samples_per_sec=\d+ workers=(\d+)`), 1, 2}
	// PyTorchRestored is a rank's restore (checkpoint or live snapshot).
	PyTorchRestored = StepLine{regexp.MustCompile(`(?m)^\[rank \d+/(\d+)\] restored step=(\d+) from `), 2, 1}
	// PyTorchSnapshot is a live snapshot written on a membership change.
	PyTorchSnapshot = StepLine{regexp.MustCompile(`(?m)^\[rank \d+/(\d+)\] live snapshot step=(\d+)`), 2, 1}
	// PyTorchFinal is rank 0's last line: step, eval loss, parameters' hash.
	PyTorchFinal = regexp.MustCompile(`(?m)^final step=(\d+) eval_loss=([0-9.]+) params_sha256=([0-9a-f]{64})`)
)

// All returns the steps of such lines in out from a group of world ranks
// ("" for any), in order.
func (l StepLine) All(out, world string) []int {
	var steps []int
	for _, m := range l.re.FindAllStringSubmatch(out, -1) {
		if world == "" || m[l.world] == world {
			if n, err := strconv.Atoi(m[l.step]); err == nil {
				steps = append(steps, n)
			}
		}
	}
	return steps
}

// Last returns the step of the last such line (see All).
func (l StepLine) Last(out, world string) (int, bool) {
	steps := l.All(out, world)
	if len(steps) == 0 {
		return 0, false
	}
	return steps[len(steps)-1], true
}

// PyTorchJob is a running elastic PyTorch job on the cluster.
type PyTorchJob struct {
	t  *testing.T
	c  *C
	ID string
}

// PyTorch wraps the elastic PyTorch job id.
func (c *C) PyTorch(t *testing.T, id string) *PyTorchJob { return &PyTorchJob{t: t, c: c, ID: id} }

// Scale sets the worker group's count.
func (j *PyTorchJob) Scale(n int) {
	j.t.Helper()
	_, err := j.c.CLI(j.t, "job", "scale", "-detach", j.ID, PyTorchWorkerGroup, strconv.Itoa(n))
	must.NoError(j.t, err)
}

// Log is a worker allocation's stdout.
func (j *PyTorchJob) Log(allocID string) string {
	return j.c.Logs(j.t, allocID, PyTorchTask, "stdout")
}

// RunningWorkers waits until exactly n worker allocations run.
func (j *PyTorchJob) RunningWorkers(n int) []*nomadapi.AllocationListStub {
	j.t.Helper()
	var running []*nomadapi.AllocationListStub
	j.c.WaitAllocs(j.t, j.ID, 3*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		running = running[:0]
		for _, a := range as {
			if a.TaskGroup == PyTorchWorkerGroup && a.ClientStatus == nomadapi.AllocClientStatusRunning {
				running = append(running, a)
			}
		}
		return len(running) == n
	})
	return running
}

// WaitStep waits until an allocation's rank 0 has logged step >= min.
func (j *PyTorchJob) WaitStep(allocID string, min int) {
	j.t.Helper()
	Eventually(j.t, 5*time.Minute, func() error {
		out := j.Log(allocID)
		if s, ok := PyTorchStep.Last(out, ""); !ok || s < min {
			return fmt.Errorf("not at step %d yet:\n%s", min, Tail(out, 8))
		}
		return nil
	})
}

// WaitStepWorkers waits until one of allocs logs a step >= min trained by a
// group of workers ranks.
func (j *PyTorchJob) WaitStepWorkers(allocs []*nomadapi.AllocationListStub, min, workers int) {
	j.t.Helper()
	Eventually(j.t, 5*time.Minute, func() error {
		for _, a := range allocs {
			for _, m := range PyTorchStep.re.FindAllStringSubmatch(j.Log(a.ID), -1) {
				if s, _ := strconv.Atoi(m[1]); s >= min && m[2] == strconv.Itoa(workers) {
					return nil
				}
			}
		}
		return fmt.Errorf("no step >= %d by %d workers yet", min, workers)
	})
}

// Regroup waits until alloc's log shows the group of `from` ranks stopping
// with a live snapshot and a group of `to` ranks restoring at or after
// step atLeast; it returns the snapshot's and the restore's steps.
func (j *PyTorchJob) Regroup(allocID string, from, to, atLeast int) (snap, restored int) {
	j.t.Helper()
	Eventually(j.t, 5*time.Minute, func() error {
		out := j.Log(allocID)
		s, okS := PyTorchSnapshot.Last(out, strconv.Itoa(from))
		r, okR := PyTorchRestored.Last(out, strconv.Itoa(to))
		if !okS || !okR || r < atLeast {
			return fmt.Errorf("no re-rendezvous as %d yet:\n%s", to, Tail(out, 8))
		}
		snap, restored = s, r
		return nil
	})
	return snap, restored
}

// GroupAlloc returns the running allocation of one of the job's groups.
func (j *PyTorchJob) GroupAlloc(group string) *nomadapi.AllocationListStub {
	j.t.Helper()
	var found *nomadapi.AllocationListStub
	j.c.WaitAllocs(j.t, j.ID, time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		for _, a := range as {
			if a.TaskGroup == group && a.ClientStatus == nomadapi.AllocClientStatusRunning {
				found = a
				return true
			}
		}
		return false
	})
	return found
}

// CompletedWorker waits for a worker allocation not in old to complete.
func (j *PyTorchJob) CompletedWorker(old map[string]bool, timeout time.Duration) *nomadapi.AllocationListStub {
	j.t.Helper()
	var done *nomadapi.AllocationListStub
	j.c.WaitAllocs(j.t, j.ID, timeout, func(as []*nomadapi.AllocationListStub) bool {
		for _, a := range as {
			if a.TaskGroup == PyTorchWorkerGroup && !old[a.ID] && a.ClientStatus == nomadapi.AllocClientStatusComplete {
				done = a
				return true
			}
		}
		return false
	})
	return done
}

// Final waits for a one-worker job to finish and returns rank 0's final
// line's submatches (step, eval loss, hash), checking the step.
func (j *PyTorchJob) Final(steps int) []string {
	j.t.Helper()
	done := j.CompletedWorker(nil, 6*time.Minute)
	out := j.Log(done.ID)
	final := PyTorchFinal.FindStringSubmatch(out)
	must.SliceLen(j.t, 4, final, must.Sprintf("no final line in %s:\n%s", j.ID, out))
	must.Eq(j.t, strconv.Itoa(steps), final[1])
	return final
}

// RendezvousDone waits until the job's rendezvous host has exited (the
// launchers tell it when training is done).
func (j *PyTorchJob) RendezvousDone() {
	j.t.Helper()
	j.c.WaitAllocs(j.t, j.ID, 2*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		for _, a := range as {
			if a.TaskGroup == "rendezvous" && a.ClientStatus != nomadapi.AllocClientStatusComplete {
				return false
			}
		}
		return true
	})
}
