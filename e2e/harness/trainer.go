package harness

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// The checkpointed example trainer's job (jobspecs/train-checkpointed.nomad.hcl),
// which e2e/driver and e2e/s3 move around a cluster and check bit for bit.
const (
	TrainerSpec  = "jobspecs/train-checkpointed.nomad.hcl"
	TrainerJob   = "train-checkpointed"
	TrainerGroup = "train"
	TrainerTask  = "trainer"
)

// TrainerFinalRe matches the trainer's final line: its step and the SHA-256
// of its parameters.
var TrainerFinalRe = regexp.MustCompile(`final step=(\d+) .* params_sha256=([0-9a-f]{64})`)

// TrainerReference runs the trainer uninterrupted for steps, outside Nomad,
// with bin (the binary the cluster runs) and any more trainer flags, and
// returns its parameters' SHA-256.
func TrainerReference(t testing.TB, bin string, steps int, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"trainer", "-steps", strconv.Itoa(steps), "-log-every", "0",
		"-checkpoint-dir", ""}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("harness: the reference run: %v\n%s", err, out)
	}
	m := TrainerFinalRe.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("harness: no final line in the reference run:\n%s", out)
	}
	return m[2]
}

// RunJobStoppedAtEnd is RunJob, and when the test ends it stops the job
// and waits until none of its allocations runs (their stop checkpoints
// committed) before the harness purges it, so the next test starts from
// no checkpoint being written.
func (c *C) RunJobStoppedAtEnd(t testing.TB, path string, vars ...string) string {
	t.Helper()
	id := c.RunJob(t, path, vars...)
	t.Cleanup(func() { // runs before RunJob's purge (cleanups are LIFO)
		if _, _, err := c.Nomad.Jobs().Deregister(id, false, nil); err != nil {
			t.Logf("harness: stopping %s: %v", id, err)
			return
		}
		c.WaitAllStopped(t, id, 2*time.Minute)
	})
	return id
}

// WaitAllStopped waits until no allocation of the job is running or
// pending.
func (c *C) WaitAllStopped(t testing.TB, jobID string, timeout time.Duration) {
	t.Helper()
	c.WaitAllocs(t, jobID, timeout, func(as []*nomadapi.AllocationListStub) bool {
		for _, a := range as {
			if a.ClientStatus == "running" || a.ClientStatus == "pending" {
				return false
			}
		}
		return true
	})
}

// WaitRunning waits for an allocation of the job not in exclude that
// should run to run, and for its task to print progress (a "step=" line).
func (c *C) WaitRunning(t testing.TB, jobID, task string, exclude map[string]bool) *nomadapi.AllocationListStub {
	t.Helper()
	var a *nomadapi.AllocationListStub
	c.WaitAllocs(t, jobID, 3*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		for _, x := range as {
			if !exclude[x.ID] && x.DesiredStatus == "run" && x.ClientStatus == "running" {
				a = x
				return true
			}
		}
		return false
	})
	Eventually(t, time.Minute, func() error {
		if out, _ := c.CLI(t, "alloc", "logs", a.ID, task); !strings.Contains(out, "step=") {
			return fmt.Errorf("no progress in %s yet", a.ID)
		}
		return nil
	})
	return a
}

// DriverEvent returns the task's first driver event containing substr, or
// nil.
func (c *C) DriverEvent(t testing.TB, allocID, task, substr string) *nomadapi.TaskEvent {
	t.Helper()
	for _, e := range c.TaskEvents(t, allocID, task) {
		if e.Type == nomadapi.TaskDriverMessage && strings.Contains(e.DriverMessage, substr) {
			return e
		}
	}
	return nil
}

// WaitDriverEvent waits (2 minutes) for a driver event of the task
// containing substr, and returns it; the failure lists the events seen.
func (c *C) WaitDriverEvent(t testing.TB, allocID, task, substr string) *nomadapi.TaskEvent {
	t.Helper()
	var ev *nomadapi.TaskEvent
	Eventually(t, 2*time.Minute, func() error {
		var seen []string
		for _, e := range c.TaskEvents(t, allocID, task) {
			seen = append(seen, e.Type+": "+e.DisplayMessage)
			if e.Type == nomadapi.TaskDriverMessage && strings.Contains(e.DriverMessage, substr) {
				ev = e
				return nil
			}
		}
		return fmt.Errorf("no %q event on %s; events: %q", substr, allocID, seen)
	})
	return ev
}

// WaitTerminal waits until the allocation's client status is terminal.
func (c *C) WaitTerminal(t testing.TB, allocID string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, func() error {
		a, _, err := c.Nomad.Allocations().Info(allocID, nil)
		if err != nil {
			return err
		}
		if !a.ClientTerminalStatus() {
			return fmt.Errorf("allocation %s is %s", allocID, a.ClientStatus)
		}
		return nil
	})
}

// Eligible marks the named client eligible for scheduling, or not.
func (c *C) Eligible(t testing.TB, name string, on bool) {
	t.Helper()
	if _, err := c.Nomad.Nodes().ToggleEligibility(c.Client(t, name).NodeID, on, nil); err != nil {
		t.Fatalf("harness: eligibility of %s: %v", name, err)
	}
}

// NodeName returns the name of the client whose node ID is nodeID.
func (c *C) NodeName(t testing.TB, nodeID string) string {
	t.Helper()
	for _, cl := range c.Clients {
		if cl.NodeID == nodeID {
			return cl.Name
		}
	}
	t.Fatalf("harness: unknown node %s", nodeID)
	return ""
}

// WaitTrainerFinal waits for the trainer's allocation to finish training
// (batch: to complete with exit code 0; service: to print its final line
// and hold) and checks that it ran all steps and that its parameters' hash
// is want, bit for bit.
func (c *C) WaitTrainerFinal(t testing.TB, allocID string, steps int, want string, service bool) {
	t.Helper()
	if service {
		Eventually(t, 3*time.Minute, func() error {
			if logs := c.Logs(t, allocID, TrainerTask, "stdout"); !strings.Contains(logs, "holding:") {
				return fmt.Errorf("%s has not finished training", allocID)
			}
			return nil
		})
	} else {
		a := c.WaitAllocStatus(t, allocID, "complete", 3*time.Minute)
		evs := a.TaskStates[TrainerTask].Events
		if last := evs[len(evs)-1]; last.Details["exit_code"] != "0" {
			t.Fatalf("harness: %s ended with %+v", allocID, last)
		}
	}
	logs := c.Logs(t, allocID, TrainerTask, "stdout")
	m := TrainerFinalRe.FindStringSubmatch(logs)
	switch {
	case m == nil:
		t.Fatalf("harness: no final line in %s:\n%s", allocID, Tail(logs, 20))
	case m[1] != strconv.Itoa(steps):
		t.Fatalf("harness: %s ended at step %s, not %d", allocID, m[1], steps)
	case m[2] != want:
		t.Fatalf("harness: final parameters of %s differ from the uninterrupted run's: %s, want %s", allocID, m[2], want)
	}
}
