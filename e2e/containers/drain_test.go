package containers_test

import (
	"cmp"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

const (
	// drainJob is the trainer with all three checkpoint tasks, set up as
	// driver/README.md's "Drains" section says (a service job, a migrate
	// block); job_type=batch gives the same group as a batch job.
	drainJob   = "e2e/containers/testdata/trainer-drain.nomad.hcl"
	drainSteps = 15000
	// drainComplete is the node event Nomad's drainer writes when it ends
	// a drain; its detail deadline_reached says the deadline ended it.
	drainComplete = "Node drain complete"
)

// drainArgs is the training every drain test runs: about 30 s of steps
// (2 ms each), progress every 50 steps, so the first step after a resume
// shows within a tenth of a second.
var drainArgs = []string{"trainer", "-steps", strconv.Itoa(drainSteps), "-step-delay", "2ms", "-log-every", "50"}

var stepLine = regexp.MustCompile(`(?m)^step=(\d+) `)

// TestContainers_Drain: the checkpointed trainer container (restore,
// sidecar and commit tasks) in a service job is drained off its node and
// resumes on the other node, under Nomad's docker driver there too but the
// other runtime (dockerd -> podman, podman -> dockerd: the checkpoint, not
// the container, moves), from the generation its final commit wrote (newer than the sidecar's on-demand one), and ends
// bit for bit against one host process. Nomad links the replacement to the
// drained allocation and starts it only after the old one's poststop
// commit. With a 1 min deadline the drain completes after that commit; with
// a 1 s deadline and a 5 s shutdown_delay before the kill signal Nomad
// reports the drain complete (deadline reached) while the commit is still
// to come, and the replacement still waits for it. (Under Nomad's podman
// driver plugin, its own slow stop made that gap; through the docker driver
// podman stops as fast as dockerd, so the delay is the jobspec's.)
func TestContainers_Drain(t *testing.T) {
	c := harness.Cluster(t)
	c.LoadImages(t)
	want := hostFinalLine(t, c, drainArgs)
	for _, tc := range []struct {
		runtime          string
		shutdownDelay    string
		deadline         time.Duration
		deadlineReached  bool
		deadlineScenario string
	}{
		{runtime: "docker", deadline: time.Minute, deadlineScenario: "the drain completes after the final commit"},
		{runtime: "podman", shutdownDelay: "5s", deadline: time.Second, deadlineReached: true,
			deadlineScenario: "the deadline passes before the final commit"},
	} {
		t.Run(tc.runtime, func(t *testing.T) {
			from, to := runtimeClients(t, c, tc.runtime)
			jobID := "e2e-ctr-drain-" + tc.runtime
			onlyEligible(t, c, from, to)
			c.RunJob(t, drainJob, "job_name="+jobID, "shutdown_delay="+cmp.Or(tc.shutdownDelay, "0s"), hclList("trainer_args", append(drainArgs, "-hold")))
			a1 := liveAlloc(t, c, jobID, nil)
			requireNode(t, c, a1, from)
			older := onDemandCheckpoint(t, c, a1)

			c.Eligible(t, to, true)
			start := drainNode(t, c, from, tc.deadline)
			saved := c.WaitDriverEvent(t, a1, "commit", "Checkpoint saved (exit)")
			a2 := liveAlloc(t, c, jobID, map[string]bool{a1: true})
			next := requireNode(t, c, a2, to)
			must.Eq(t, a1, next.PreviousAllocation, must.Sprint("a drain's replacement is linked to the drained allocation"))
			restored := resumedFrom(t, c, a2, saved, older)
			firstStep := firstStepAfter(t, c, a2, saved.Details["step"])

			done := drainEnd(t, c, from, start)
			must.Eq(t, tc.deadlineReached, done.Details["deadline_reached"] == "true",
				must.Sprintf("%s: node event %+v", tc.deadlineScenario, done))
			must.Eq(t, tc.deadlineReached, done.Timestamp.Before(eventTime(saved)),
				must.Sprintf("%s: drain complete at %s, final commit at %s", tc.deadlineScenario,
					done.Timestamp.Format(time.StampMicro), eventTime(saved).Format(time.StampMicro)))

			got := waitFinalLine(t, c, a2)
			t.Logf("%s -> %s, deadline %s (%s): drain -> drain complete %s, -> final commit %s (generation %s at step %s; on-demand generation %d), "+
				"-> restored %s (in %s), -> first step %s",
				from, to, tc.deadline, tc.deadlineScenario, done.Timestamp.Sub(start).Round(time.Millisecond),
				eventTime(saved).Sub(start).Round(time.Millisecond), saved.Details["generation"], saved.Details["step"], older,
				eventTime(restored).Sub(start).Round(time.Millisecond), restored.Details["duration"], firstStep.Sub(start).Round(time.Millisecond))
			must.Eq(t, want, got, must.Sprint("the drained and resumed container's final line against the host process's"))
		})
	}
}

// TestContainers_DrainBatch: what a drain does to the same group as a batch
// job. The allocation runs on until the drain's deadline (Nomad lets batch
// allocations finish) and is stopped at the deadline (the trainer saves on
// its kill signal, the poststop task commits). Then the agents differ. On
// Nomad v1.11.3 it is not replaced: the drainer marks it to migrate with
// placement disabled (DesiredTransition.MigrateDisablePlacement), and
// `nomad job eval` places a new, unlinked allocation; run while the old one
// may still be committing, its restore waits for that commit (the writer
// lease and Nomad's API) and resumes from it, ending bit for bit. Nomad
// v1.6, which has no such mark, migrates it: the drain places a linked
// replacement on the other node, which restores the final commit and ends
// bit for bit (batchDrainMigrates).
func TestContainers_DrainBatch(t *testing.T) {
	c := harness.Cluster(t)
	c.LoadImages(t)
	want := hostFinalLine(t, c, drainArgs)
	const deadline = 10 * time.Second
	from, to := runtimeClients(t, c, "docker")
	jobID := "e2e-ctr-drain-batch"
	onlyEligible(t, c, from, to)
	c.RunJob(t, drainJob, "job_name="+jobID, "job_type=batch", hclList("trainer_args", append(drainArgs, "-hold")))
	a1 := liveAlloc(t, c, jobID, nil)
	requireNode(t, c, a1, from)
	older := onDemandCheckpoint(t, c, a1)

	c.Eligible(t, to, true)
	start := drainNode(t, c, from, deadline)
	killed := waitKilling(t, c, a1)
	must.False(t, eventTime(killed).Before(start.Add(deadline)),
		must.Sprintf("the batch allocation was stopped %s after the drain began, before its %s deadline",
			eventTime(killed).Sub(start), deadline))
	old, _, err := c.Nomad.Allocations().Info(a1, nil)
	must.NoError(t, err)
	must.Eq(t, "alloc is being migrated", old.DesiredDescription)
	if old.DesiredTransition.MigrateDisablePlacement == nil {
		batchDrainMigrates(t, c, jobID, a1, to, older, want, start, killed)
		return
	}
	must.True(t, *old.DesiredTransition.MigrateDisablePlacement, must.Sprint("the drainer disables the batch replacement"))
	evalsDone(t, c, jobID)
	allocs, _, err := c.Nomad.Jobs().Allocations(jobID, true, nil)
	must.NoError(t, err)
	must.SliceLen(t, 1, allocs, must.Sprintf("the drain's evaluation placed a replacement: %+v", allocs))

	// The workaround: any evaluation of the job places the allocation the
	// drain stopped.
	_, err = c.CLI(t, "job", "eval", "-detach", jobID)
	must.NoError(t, err)
	a2 := liveAlloc(t, c, jobID, map[string]bool{a1: true})
	next := requireNode(t, c, a2, to)
	must.Eq(t, "", next.PreviousAllocation, must.Sprint("an evaluation's placement is not linked to the drained allocation"))
	saved := c.WaitDriverEvent(t, a1, "commit", "Checkpoint saved (exit)")
	restored := resumedFrom(t, c, a2, saved, older)
	waited := hasEvent(t, c, a2, "restore", "Waiting for allocation "+a1)
	got := waitFinalLine(t, c, a2)
	t.Logf("batch, deadline %s: drain -> trainer stopped %s, -> final commit %s (generation %s at step %s; on-demand generation %d), "+
		"-> restored %s on %s after `job eval` (waited for %s: %t)",
		deadline, eventTime(killed).Sub(start).Round(time.Millisecond), eventTime(saved).Sub(start).Round(time.Millisecond),
		saved.Details["generation"], saved.Details["step"], older, eventTime(restored).Sub(start).Round(time.Millisecond), to, a1[:8], waited)
	must.Eq(t, want, got, must.Sprint("the drained batch container's final line against the host process's"))
}

// batchDrainMigrates is the end of TestContainers_DrainBatch on an agent
// whose drainer migrates batch allocations (Nomad v1.6): the drained
// allocation a1's replacement on the node to is linked to it, restores its
// final commit and ends with want.
func batchDrainMigrates(t *testing.T, c *harness.C, jobID, a1, to string, older int, want string,
	start time.Time, killed *nomadapi.TaskEvent) {
	t.Helper()
	a2 := liveAlloc(t, c, jobID, map[string]bool{a1: true})
	next := requireNode(t, c, a2, to)
	must.Eq(t, a1, next.PreviousAllocation, must.Sprint("the drain's replacement is linked to the drained allocation"))
	saved := c.WaitDriverEvent(t, a1, "commit", "Checkpoint saved (exit)")
	restored := resumedFrom(t, c, a2, saved, older)
	got := waitFinalLine(t, c, a2)
	t.Logf("batch, agent without MigrateDisablePlacement: drain -> trainer stopped %s, -> final commit %s (generation %s "+
		"at step %s; on-demand generation %d), -> restored %s on %s by the drain's own replacement",
		eventTime(killed).Sub(start).Round(time.Millisecond), eventTime(saved).Sub(start).Round(time.Millisecond),
		saved.Details["generation"], saved.Details["step"], older, eventTime(restored).Sub(start).Round(time.Millisecond), to)
	must.Eq(t, want, got, must.Sprint("the drained batch container's final line against the host process's"))
}

// hostFinalLine runs the training as one host process and returns its
// final line.
func hostFinalLine(t *testing.T, c *harness.C, args []string) string {
	t.Helper()
	out, err := exec.Command(c.Bin, append(append([]string{}, args...), "-log-every", "0")...).CombinedOutput()
	must.NoError(t, err, must.Sprintf("host trainer: %s", out))
	want := finalLine.FindString(string(out))
	must.NotEq(t, "", want, must.Sprintf("host trainer printed no final line: %s", out))
	return want
}

// hclList renders a list(string) job variable.
func hclList(name string, values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = strconv.Quote(v)
	}
	return name + "=[" + strings.Join(quoted, ",") + "]"
}

// runtimeClients returns the client backed by the runtime, where the
// runtime's tests start, and the other client, backed by the other runtime,
// both checked.
func runtimeClients(t *testing.T, c *harness.C, runtime string) (from, to string) {
	t.Helper()
	for _, d := range harness.ContainerRuntimes {
		if d.Name == runtime {
			c.RequireRuntimes(t, d)
			return d.Client, d.Other
		}
	}
	t.Fatalf("no container runtime %q", runtime)
	return "", ""
}

// onlyEligible leaves only client from eligible for placements; at the end
// of the test both clients are undrained and eligible again.
func onlyEligible(t *testing.T, c *harness.C, from, to string) {
	t.Helper()
	t.Cleanup(func() {
		for _, cl := range []string{from, to} {
			_, _ = c.Nomad.Nodes().UpdateDrain(c.Client(t, cl).NodeID, nil, true, nil)
			c.Eligible(t, cl, true)
		}
	})
	c.Eligible(t, from, true)
	c.Eligible(t, to, false)
}

// drainNode starts a drain of the client with the deadline and returns when
// it began.
func drainNode(t *testing.T, c *harness.C, client string, deadline time.Duration) time.Time {
	t.Helper()
	start := time.Now()
	_, err := c.Nomad.Nodes().UpdateDrain(c.Client(t, client).NodeID, &nomadapi.DrainSpec{Deadline: deadline}, false, nil)
	must.NoError(t, err)
	return start
}

// drainEnd waits for the node event that ends the drain begun at start.
func drainEnd(t *testing.T, c *harness.C, client string, start time.Time) *nomadapi.NodeEvent {
	t.Helper()
	var done *nomadapi.NodeEvent
	harness.Eventually(t, 2*time.Minute, func() error {
		node, _, err := c.Nomad.Nodes().Info(c.Client(t, client).NodeID, nil)
		if err != nil {
			return err
		}
		for _, e := range node.Events {
			if e.Message == drainComplete && !e.Timestamp.Before(start.Truncate(time.Second)) {
				done = e
				return nil
			}
		}
		return fmt.Errorf("%s: no %q event since %s", client, drainComplete, start.Format(time.StampMilli))
	})
	return done
}

// requireNode checks that the allocation runs on the client and returns it.
func requireNode(t *testing.T, c *harness.C, allocID, client string) *nomadapi.Allocation {
	t.Helper()
	a, _, err := c.Nomad.Allocations().Info(allocID, nil)
	must.NoError(t, err)
	must.Eq(t, client, a.NodeName, must.Sprintf("allocation %s", allocID))
	return a
}

// onDemandCheckpoint waits for training progress, then has the sidecar
// commit an on-demand checkpoint and returns its generation: the older
// generation a restore must not start from once a final commit is newer.
func onDemandCheckpoint(t *testing.T, c *harness.C, allocID string) int {
	t.Helper()
	harness.Eventually(t, 3*time.Minute, func() error {
		if !stepLine.MatchString(c.Logs(t, allocID, "trainer", "stdout")) {
			return fmt.Errorf("no training progress in %s yet", allocID)
		}
		return nil
	})
	_, err := c.CLI(t, "alloc", "signal", "-s", "SIGUSR1", allocID, "checkpoint")
	must.NoError(t, err)
	ev := c.WaitDriverEvent(t, allocID, "checkpoint", "Checkpoint saved (on demand)")
	gen, err := strconv.Atoi(ev.Details["generation"])
	must.NoError(t, err, must.Sprintf("event %q", ev.DriverMessage))
	return gen
}

// resumedFrom checks that the allocation restored the generation of the
// final commit, newer than the on-demand one, and that its trainer resumed
// from that commit's step; it returns the restore event.
func resumedFrom(t *testing.T, c *harness.C, allocID string, saved *nomadapi.TaskEvent, older int) *nomadapi.TaskEvent {
	t.Helper()
	restored := c.WaitDriverEvent(t, allocID, "restore", "Checkpoint restored")
	must.Eq(t, saved.Details["generation"], restored.Details["generation"],
		must.Sprintf("restored %q; the drained allocation's final commit was %q", restored.DriverMessage, saved.DriverMessage))
	gen, err := strconv.Atoi(saved.Details["generation"])
	must.NoError(t, err)
	must.Greater(t, older, gen, must.Sprint("the final commit is not newer than the sidecar's"))
	harness.Eventually(t, 3*time.Minute, func() error {
		if log := c.Logs(t, allocID, "trainer", "stdout"); !strings.Contains(log, "resumed step="+saved.Details["step"]+" ") {
			return fmt.Errorf("the resumed trainer did not report step %s yet", saved.Details["step"])
		}
		return nil
	})
	return restored
}

// firstStepAfter polls the trainer's log for its first progress line past
// step and returns when it was seen (within the 250 ms poll and 50 steps).
func firstStepAfter(t *testing.T, c *harness.C, allocID, step string) time.Time {
	t.Helper()
	from, err := strconv.Atoi(step)
	must.NoError(t, err)
	harness.Eventually(t, 3*time.Minute, func() error {
		for _, m := range stepLine.FindAllStringSubmatch(c.Logs(t, allocID, "trainer", "stdout"), -1) {
			if n, _ := strconv.Atoi(m[1]); n > from {
				return nil
			}
		}
		return fmt.Errorf("no step past %d in %s yet", from, allocID)
	})
	return time.Now()
}

// waitFinalLine waits for the trainer's final line (it holds after it).
func waitFinalLine(t *testing.T, c *harness.C, allocID string) string {
	t.Helper()
	var got string
	harness.Eventually(t, 3*time.Minute, func() error {
		if got = finalLine.FindString(c.Logs(t, allocID, "trainer", "stdout")); got == "" {
			return fmt.Errorf("no final line in %s's log yet", allocID)
		}
		return nil
	})
	return got
}

// waitKilling waits for the trainer's Killing event (Nomad's stop).
func waitKilling(t *testing.T, c *harness.C, allocID string) *nomadapi.TaskEvent {
	t.Helper()
	var ev *nomadapi.TaskEvent
	harness.Eventually(t, 2*time.Minute, func() error {
		for _, e := range c.TaskEvents(t, allocID, "trainer") {
			if e.Type == nomadapi.TaskKilling {
				ev = e
				return nil
			}
		}
		return fmt.Errorf("the trainer of %s has not been stopped yet", allocID)
	})
	return ev
}

// hasEvent says whether the task has a driver event containing substr.
func hasEvent(t *testing.T, c *harness.C, allocID, task, substr string) bool {
	t.Helper()
	for _, e := range c.TaskEvents(t, allocID, task) {
		if e.Type == nomadapi.TaskDriverMessage && strings.Contains(e.DriverMessage, substr) {
			return true
		}
	}
	return false
}

// evalsDone waits until every evaluation of the job has ended.
func evalsDone(t *testing.T, c *harness.C, jobID string) {
	t.Helper()
	harness.Eventually(t, time.Minute, func() error {
		evals, _, err := c.Nomad.Jobs().Evaluations(jobID, nil)
		if err != nil {
			return err
		}
		for _, e := range evals {
			if e.Status == "pending" || e.Status == "blocked" {
				return fmt.Errorf("evaluation %s (%s) of %s is %s", e.ID[:8], e.TriggeredBy, jobID, e.Status)
			}
		}
		return nil
	})
}

func eventTime(e *nomadapi.TaskEvent) time.Time { return time.Unix(0, e.Time) }
