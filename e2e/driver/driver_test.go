package driver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/e2e/harness"
)

const (
	jobspec = "jobspecs/train-checkpointed.nomad.hcl"
	jobID   = "train-checkpointed"
	group   = "train"
	task    = "trainer"
	// steps and delay make an uninterrupted run last about 20s.
	steps     = 10000
	stepDelay = "2ms"
)

var finalRe = regexp.MustCompile(`final step=(\d+) .* params_sha256=([0-9a-f]{64})`)

// reference runs the same training uninterrupted, outside Nomad, with the
// binary the cluster runs.
func reference(t *testing.T, c *harness.C) string {
	t.Helper()
	out, err := exec.Command(c.Bin, "trainer", "-steps", strconv.Itoa(steps), "-log-every", "0", "-checkpoint-dir", "").CombinedOutput()
	must.NoError(t, err, must.Sprint(string(out)))
	m := finalRe.FindStringSubmatch(string(out))
	must.SliceLen(t, 3, m, must.Sprint(string(out)))
	return m[2]
}

// setup gives the test a clean store key and eligible, undrained nodes, and
// restores that at the end.
func setup(t *testing.T, c *harness.C) {
	t.Helper()
	clean := func() {
		// The job's keys: default/<job>@<create index>/... (and, from
		// before incarnations, default/<job>/...).
		dirs, _ := filepath.Glob(filepath.Join(c.CheckpointDir, "default", jobID+"@*"))
		for _, d := range append(dirs, filepath.Join(c.CheckpointDir, "default", jobID)) {
			_ = os.RemoveAll(d)
		}
		for _, cl := range c.Clients {
			_, _ = c.Nomad.Nodes().UpdateDrain(cl.NodeID, nil, true, nil)
			_, _ = c.Nomad.Nodes().ToggleEligibility(cl.NodeID, true, nil)
		}
	}
	clean()
	t.Cleanup(clean)
}

// runJob runs the jobspec and, at the end of the test, stops the job and
// waits until every allocation has stopped (its stop checkpoint committed)
// before the harness purges it and setup cleans the store, so the next test
// starts from no checkpoint.
func runJob(t *testing.T, c *harness.C, vars ...string) {
	t.Helper()
	id := c.RunJob(t, jobspec, vars...)
	t.Cleanup(func() { // runs before the harness's purge (cleanups are LIFO)
		if _, _, err := c.Nomad.Jobs().Deregister(id, false, nil); err != nil {
			t.Logf("stopping %s: %v", id, err)
			return
		}
		harness.Eventually(t, 2*time.Minute, func() error {
			allocs, _, err := c.Nomad.Jobs().Allocations(id, true, nil)
			if err != nil {
				return err
			}
			for _, a := range allocs {
				if a.ClientStatus == "running" || a.ClientStatus == "pending" {
					return fmt.Errorf("allocation %s is still %s", a.ID, a.ClientStatus)
				}
			}
			return nil
		})
	})
}

func eligible(t *testing.T, c *harness.C, name string, on bool) {
	t.Helper()
	_, err := c.Nomad.Nodes().ToggleEligibility(c.Client(t, name).NodeID, on, nil)
	must.NoError(t, err)
}

// running waits for the job's one allocation that should run, and for it to
// run and print progress.
func running(t *testing.T, c *harness.C, exclude map[string]bool) *nomadapi.AllocationListStub {
	t.Helper()
	allocs := c.WaitAllocs(t, jobID, 3*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		for _, a := range as {
			if !exclude[a.ID] && a.DesiredStatus == "run" && a.ClientStatus == "running" {
				return true
			}
		}
		return false
	})
	var a *nomadapi.AllocationListStub
	for _, x := range allocs {
		if !exclude[x.ID] && x.DesiredStatus == "run" && x.ClientStatus == "running" {
			a = x
		}
	}
	harness.Eventually(t, time.Minute, func() error {
		if out, _ := c.CLI(t, "alloc", "logs", a.ID, task); !strings.Contains(out, "step=") {
			return fmt.Errorf("no progress in %s yet", a.ID)
		}
		return nil
	})
	return a
}

// event waits for a driver event of the allocation containing substr.
func event(t *testing.T, c *harness.C, allocID, substr string) *nomadapi.TaskEvent {
	t.Helper()
	var ev *nomadapi.TaskEvent
	harness.Eventually(t, 2*time.Minute, func() error {
		var seen []string
		for _, e := range c.TaskEvents(t, allocID, task) {
			seen = append(seen, e.Type+": "+e.DriverMessage)
			if e.Type == nomadapi.TaskDriverMessage && strings.Contains(e.DriverMessage, substr) {
				ev = e
				return nil
			}
		}
		return fmt.Errorf("no %q event on %s; events: %q", substr, allocID, seen)
	})
	return ev
}

func waitTerminal(t *testing.T, c *harness.C, allocID string) {
	t.Helper()
	harness.Eventually(t, 3*time.Minute, func() error {
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

func nodeName(t *testing.T, c *harness.C, nodeID string) string {
	t.Helper()
	for _, cl := range c.Clients {
		if cl.NodeID == nodeID {
			return cl.Name
		}
	}
	t.Fatalf("unknown node %s", nodeID)
	return ""
}

func durationDetail(t *testing.T, ev *nomadapi.TaskEvent, key string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(ev.Details[key])
	must.NoError(t, err, must.Sprintf("event %q detail %s", ev.DriverMessage, key))
	return d
}

// finish waits for the last allocation to finish training (batch: to
// complete with exit code 0; service: to print its final line and hold) and
// compares its final parameters with the uninterrupted run's.
func finish(t *testing.T, c *harness.C, allocID, want string, service bool) {
	t.Helper()
	if service {
		harness.Eventually(t, 3*time.Minute, func() error {
			if logs := c.Logs(t, allocID, task, "stdout"); !strings.Contains(logs, "holding:") {
				return fmt.Errorf("%s has not finished training", allocID)
			}
			return nil
		})
	} else {
		a := c.WaitAllocStatus(t, allocID, "complete", 3*time.Minute)
		evs := a.TaskStates[task].Events
		must.Eq(t, "0", evs[len(evs)-1].Details["exit_code"], must.Sprintf("last event %+v", evs[len(evs)-1]))
	}
	logs := c.Logs(t, allocID, task, "stdout")
	m := finalRe.FindStringSubmatch(logs)
	must.SliceLen(t, 3, m, must.Sprint(logs))
	must.Eq(t, strconv.Itoa(steps), m[1])
	must.Eq(t, want, m[2], must.Sprint("final parameters differ from the uninterrupted run"))
}

// TestDriver_SuspendResumeMigrateDrain suspends the trainer (scale 0), resumes
// it (scale 1), migrates it client1 -> client2 (alloc stop, client1
// ineligible), drains client2 (back to client1), replaces it by a
// destructive job update, and checks the final
// parameters equal an uninterrupted run's, bit for bit. It logs the
// driver's share of the suspend -> resume cycle.
func TestDriver_SuspendResumeMigrateDrain(t *testing.T) {
	c := harness.Cluster(t)
	setup(t, c)
	want := reference(t, c)

	eligible(t, c, "client2", false) // start on client1
	// A service job: Nomad does not replace drained batch allocations.
	runJob(t, c, "caravan_bin="+c.Bin, "steps="+strconv.Itoa(steps), "step_delay="+stepDelay,
		"job_type=service", "hold=true")
	a1 := running(t, c, nil)
	must.Eq(t, "client1", nodeName(t, c, a1.NodeID))

	// Suspend: scale to 0; the driver checkpoints on stop.
	suspendStart := time.Now()
	_, err := c.CLI(t, "job", "scale", jobID, group, "0")
	must.NoError(t, err)
	saved := event(t, c, a1.ID, "Checkpoint saved (stop)")
	waitTerminal(t, c, a1.ID)
	suspended := time.Since(suspendStart)
	checkDriverMetrics(t, c.Clients[0].DriverMetricsAddr)

	// Resume: scale back to 1; the new allocation restores.
	resumeStart := time.Now()
	_, err = c.CLI(t, "job", "scale", jobID, group, "1")
	must.NoError(t, err)
	a2 := running(t, c, map[string]bool{a1.ID: true})
	restored := event(t, c, a2.ID, "Checkpoint restored")
	resumed := time.Since(resumeStart)
	must.Eq(t, "client1", restored.Details["node"])
	must.Eq(t, saved.Details["generation"], restored.Details["generation"])
	must.StrContains(t, c.Logs(t, a2.ID, task, "stdout"), "resumed step="+saved.Details["step"])

	commit := durationDetail(t, saved, "duration")
	taskWrite := durationDetail(t, saved, "task_duration")
	restore := durationDetail(t, restored, "duration")
	toSaved := time.Unix(0, saved.Time).Sub(suspendStart)
	toRestored := time.Unix(0, restored.Time).Sub(resumeStart)
	t.Logf("suspend: scale 0 -> checkpoint saved %s (trainer writing %s, store commit %s, %s bytes), allocation stopped %s",
		toSaved.Round(time.Millisecond), taskWrite, commit, saved.Details["bytes"], suspended.Round(time.Millisecond))
	t.Logf("resume: scale 1 -> checkpoint restored %s (restore %s), training again %s",
		toRestored.Round(time.Millisecond), restore, resumed.Round(time.Millisecond))
	t.Logf("driver's own share of the cycle (commit + restore): %s", commit+restore)

	// Migrate client1 -> client2 with `nomad alloc stop`.
	eligible(t, c, "client2", true)
	eligible(t, c, "client1", false)
	_, err = c.CLI(t, "alloc", "stop", "-detach", a2.ID)
	must.NoError(t, err)
	event(t, c, a2.ID, "Checkpoint saved (stop)")
	a3 := running(t, c, map[string]bool{a1.ID: true, a2.ID: true})
	must.Eq(t, "client2", nodeName(t, c, a3.NodeID))
	ev := event(t, c, a3.ID, "Checkpoint restored")
	must.Eq(t, "client1", ev.Details["node"])

	// Drain client2: the allocation moves back to client1.
	eligible(t, c, "client1", true)
	_, err = c.Nomad.Nodes().UpdateDrain(c.Client(t, "client2").NodeID, &nomadapi.DrainSpec{Deadline: 3 * time.Second}, false, nil)
	must.NoError(t, err)
	event(t, c, a3.ID, "Checkpoint saved (stop)")
	a4 := running(t, c, map[string]bool{a1.ID: true, a2.ID: true, a3.ID: true})
	must.Eq(t, "client1", nodeName(t, c, a4.NodeID))
	ev = event(t, c, a4.ID, "Checkpoint restored")
	must.Eq(t, "client2", ev.Details["node"])

	// A destructive update (a new step delay: same training, new task
	// config) replaces the allocation; the new one continues.
	_, err = c.CLI(t, "job", "run", "-detach", "-var", "caravan_bin="+c.Bin, "-var", "steps="+strconv.Itoa(steps),
		"-var", "step_delay=1ms", "-var", "job_type=service", "-var", "hold=true", jobspec)
	must.NoError(t, err)
	event(t, c, a4.ID, "Checkpoint saved (stop)")
	a5 := running(t, c, map[string]bool{a1.ID: true, a2.ID: true, a3.ID: true, a4.ID: true})
	event(t, c, a5.ID, "Checkpoint restored")

	finish(t, c, a5.ID, want, true)
}

// pluginPID finds the caravan driver plugin process of a client agent.
func pluginPID(t *testing.T, c *harness.C, clientPID int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	must.NoError(t, err)
	want := c.Bin + "\x00driver\x00"
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || string(cmd) != want {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// stat: pid (comm) state ppid ...
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(clientPID) {
			return pid
		}
	}
	t.Fatalf("no caravan driver plugin under client pid %d", clientPID)
	return 0
}

// TestDriver_PluginKillTaskSurvives kills the driver plugin with SIGKILL
// while the trainer runs: the task keeps running, the client's new plugin
// instance reattaches, an on-demand checkpoint works through it, and the
// run ends with the uninterrupted run's parameters.
func TestDriver_PluginKillTaskSurvives(t *testing.T) {
	c := harness.Cluster(t)
	setup(t, c)
	want := reference(t, c)

	runJob(t, c, "caravan_bin="+c.Bin, "steps="+strconv.Itoa(steps), "step_delay="+stepDelay)
	a := running(t, c, nil)
	var clientPID int
	for _, cl := range c.Clients {
		if cl.NodeID == a.NodeID {
			clientPID = cl.PID
		}
	}
	must.Positive(t, clientPID)
	old := pluginPID(t, c, clientPID)
	must.NoError(t, syscall.Kill(old, syscall.SIGKILL))

	// The client relaunches the plugin, which recovers the task.
	harness.Eventually(t, time.Minute, func() error {
		_, err := c.CLI(t, "alloc", "signal", "-s", "SIGUSR1", a.ID, task)
		return err
	})
	saved := event(t, c, a.ID, "Checkpoint saved (on demand)")
	must.NotEq(t, old, pluginPID(t, c, clientPID))

	// exec and stats work through the new plugin instance too.
	out, err := c.CLI(t, "alloc", "exec", "-task", task, a.ID, "/bin/sh", "-c", `cat "$CARAVAN_CHECKPOINT_DIR/caravan-checkpoint.json"`)
	must.NoError(t, err)
	must.StrContains(t, out, `"step":`+saved.Details["step"])
	alloc, _, err := c.Nomad.Allocations().Info(a.ID, nil)
	must.NoError(t, err)
	stats, err := c.Nomad.Allocations().Stats(alloc, nil)
	must.NoError(t, err)
	must.NotNil(t, stats.Tasks[task])
	must.Positive(t, stats.Tasks[task].ResourceUsage.MemoryStats.RSS)

	finish(t, c, a.ID, want, false)
	started := 0
	for _, e := range c.TaskEvents(t, a.ID, task) {
		if e.Type == nomadapi.TaskStarted {
			started++
		}
	}
	must.Eq(t, 1, started, must.Sprint("the task was restarted instead of surviving"))
}

// TestDriver_PeriodicCheckpoints runs the trainer with checkpoint_interval
// and sees periodic generations committed while it trains.
func TestDriver_PeriodicCheckpoints(t *testing.T) {
	c := harness.Cluster(t)
	setup(t, c)
	runJob(t, c, "caravan_bin="+c.Bin, "steps="+strconv.Itoa(steps), "step_delay="+stepDelay, "checkpoint_interval=2s")
	a := running(t, c, nil)
	harness.Eventually(t, time.Minute, func() error {
		n := 0
		for _, e := range c.TaskEvents(t, a.ID, task) {
			if e.Type == nomadapi.TaskDriverMessage && strings.Contains(e.DriverMessage, "Checkpoint saved (periodic)") {
				n++
			}
		}
		if n < 2 {
			return fmt.Errorf("%d periodic checkpoints so far", n)
		}
		return nil
	})
	st, err := store.Open(c.CheckpointDir, store.Options{})
	must.NoError(t, err)
	job, _, err := c.Nomad.Jobs().Info(jobID, nil)
	must.NoError(t, err)
	ms, err := st.List(store.Key{Namespace: "default", Job: jobID, Group: group, Task: task, Index: 0,
		Incarnation: strconv.FormatUint(*job.CreateIndex, 10)})
	must.NoError(t, err)
	must.SliceNotEmpty(t, ms)
	must.Eq(t, "periodic", ms[len(ms)-1].Meta["reason"])
}
