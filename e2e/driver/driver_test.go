package driver

import (
	"fmt"
	"os"
	"path/filepath"
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
	jobspec = harness.TrainerSpec
	jobID   = harness.TrainerJob
	group   = harness.TrainerGroup
	task    = harness.TrainerTask
	// steps and delay make an uninterrupted run last about 20s.
	steps     = 10000
	stepDelay = "2ms"
)

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

func durationDetail(t *testing.T, ev *nomadapi.TaskEvent, key string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(ev.Details[key])
	must.NoError(t, err, must.Sprintf("event %q detail %s", ev.DriverMessage, key))
	return d
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
	want := harness.TrainerReference(t, c.Bin, steps)

	c.Eligible(t, "client2", false) // start on client1
	// A service job: Nomad does not replace drained batch allocations.
	c.RunJobStoppedAtEnd(t, jobspec, "caravan_bin="+c.Bin, "steps="+strconv.Itoa(steps), "step_delay="+stepDelay,
		"job_type=service", "hold=true")
	a1 := c.WaitRunning(t, jobID, task, nil)
	must.Eq(t, "client1", c.NodeName(t, a1.NodeID))

	// Suspend: scale to 0; the driver checkpoints on stop.
	suspendStart := time.Now()
	_, err := c.CLI(t, "job", "scale", jobID, group, "0")
	must.NoError(t, err)
	saved := c.WaitDriverEvent(t, a1.ID, task, "Checkpoint saved (stop)")
	c.WaitTerminal(t, a1.ID, 3*time.Minute)
	suspended := time.Since(suspendStart)
	checkDriverMetrics(t, c.Clients[0].DriverMetricsAddr)

	// Resume: scale back to 1; the new allocation restores.
	resumeStart := time.Now()
	_, err = c.CLI(t, "job", "scale", jobID, group, "1")
	must.NoError(t, err)
	a2 := c.WaitRunning(t, jobID, task, map[string]bool{a1.ID: true})
	restored := c.WaitDriverEvent(t, a2.ID, task, "Checkpoint restored")
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
	c.Eligible(t, "client2", true)
	c.Eligible(t, "client1", false)
	_, err = c.CLI(t, "alloc", "stop", "-detach", a2.ID)
	must.NoError(t, err)
	c.WaitDriverEvent(t, a2.ID, task, "Checkpoint saved (stop)")
	a3 := c.WaitRunning(t, jobID, task, map[string]bool{a1.ID: true, a2.ID: true})
	must.Eq(t, "client2", c.NodeName(t, a3.NodeID))
	ev := c.WaitDriverEvent(t, a3.ID, task, "Checkpoint restored")
	must.Eq(t, "client1", ev.Details["node"])

	// Drain client2: the allocation moves back to client1.
	c.Eligible(t, "client1", true)
	_, err = c.Nomad.Nodes().UpdateDrain(c.Client(t, "client2").NodeID, &nomadapi.DrainSpec{Deadline: 3 * time.Second}, false, nil)
	must.NoError(t, err)
	c.WaitDriverEvent(t, a3.ID, task, "Checkpoint saved (stop)")
	a4 := c.WaitRunning(t, jobID, task, map[string]bool{a1.ID: true, a2.ID: true, a3.ID: true})
	must.Eq(t, "client1", c.NodeName(t, a4.NodeID))
	ev = c.WaitDriverEvent(t, a4.ID, task, "Checkpoint restored")
	must.Eq(t, "client2", ev.Details["node"])

	// A destructive update (a new step delay: same training, new task
	// config) replaces the allocation; the new one continues.
	_, err = c.CLI(t, "job", "run", "-detach", "-var", "caravan_bin="+c.Bin, "-var", "steps="+strconv.Itoa(steps),
		"-var", "step_delay=1ms", "-var", "job_type=service", "-var", "hold=true", jobspec)
	must.NoError(t, err)
	c.WaitDriverEvent(t, a4.ID, task, "Checkpoint saved (stop)")
	a5 := c.WaitRunning(t, jobID, task, map[string]bool{a1.ID: true, a2.ID: true, a3.ID: true, a4.ID: true})
	c.WaitDriverEvent(t, a5.ID, task, "Checkpoint restored")

	c.WaitTrainerFinal(t, a5.ID, steps, want, true)
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
	want := harness.TrainerReference(t, c.Bin, steps)

	c.RunJobStoppedAtEnd(t, jobspec, "caravan_bin="+c.Bin, "steps="+strconv.Itoa(steps), "step_delay="+stepDelay)
	a := c.WaitRunning(t, jobID, task, nil)
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
	saved := c.WaitDriverEvent(t, a.ID, task, "Checkpoint saved (on demand)")
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

	c.WaitTrainerFinal(t, a.ID, steps, want, false)
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
	c.RunJobStoppedAtEnd(t, jobspec, "caravan_bin="+c.Bin, "steps="+strconv.Itoa(steps), "step_delay="+stepDelay, "checkpoint_interval=2s")
	a := c.WaitRunning(t, jobID, task, nil)
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
