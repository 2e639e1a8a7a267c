package adversarial

import (
	"bytes"
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

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// The shipped training jobspec and its names.
const (
	trainJob   = "jobspecs/train-checkpointed.nomad.hcl"
	trainID    = "train-checkpointed"
	trainGroup = "train"
	trainTask  = "trainer"
	trainSteps = 12000
)

var finalRe = regexp.MustCompile(`final step=(\d+) .* params_sha256=([0-9a-f]{64})`)

// trainer drives the shipped training job through moves.
type trainer struct {
	c    *harness.C
	seen map[string]bool
}

func newTrainer(t *testing.T) *trainer {
	t.Helper()
	c := harness.Cluster(t)
	clean := func() {
		for _, d := range jobDirs(c, trainID) {
			_ = os.RemoveAll(d)
		}
		for _, cl := range c.Clients {
			_, _ = c.Nomad.Nodes().UpdateDrain(cl.NodeID, nil, true, nil)
			_, _ = c.Nomad.Nodes().ToggleEligibility(cl.NodeID, true, nil)
		}
	}
	clean()
	t.Cleanup(clean)
	return &trainer{c: c, seen: map[string]bool{}}
}

// reference is the final parameter hash of an uninterrupted run.
func (tr *trainer) reference(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(tr.c.Bin, "trainer", "-steps", strconv.Itoa(trainSteps), "-log-every", "0", "-checkpoint-dir", "").CombinedOutput()
	must.NoError(t, err, must.Sprint(string(out)))
	m := finalRe.FindStringSubmatch(string(out))
	must.SliceLen(t, 3, m, must.Sprint(string(out)))
	return m[2]
}

// next waits for a running allocation not seen before that has trained.
func (tr *trainer) next(t *testing.T) *nomadapi.AllocationListStub {
	t.Helper()
	var found *nomadapi.AllocationListStub
	tr.c.WaitAllocs(t, trainID, 3*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		for _, a := range as {
			if !tr.seen[a.ID] && a.DesiredStatus == "run" && a.ClientStatus == "running" {
				found = a
				return true
			}
		}
		return false
	})
	tr.seen[found.ID] = true
	harness.Eventually(t, time.Minute, func() error {
		if !strings.Contains(tr.c.Logs(t, found.ID, trainTask, "stdout"), "step=") {
			return fmt.Errorf("no progress in %s yet", found.ID)
		}
		return nil
	})
	return found
}

// event waits for a driver event on the allocation containing substr.
func (tr *trainer) event(t *testing.T, allocID, substr string) *nomadapi.TaskEvent {
	t.Helper()
	var ev *nomadapi.TaskEvent
	harness.Eventually(t, 2*time.Minute, func() (err error) {
		ev, err = tr.findEvent(t, allocID, substr)
		return err
	})
	return ev
}

// findEvent returns the allocation's first driver event containing substr,
// or an error if there is none yet.
func (tr *trainer) findEvent(t *testing.T, allocID, substr string) (*nomadapi.TaskEvent, error) {
	for _, e := range tr.c.TaskEvents(t, allocID, trainTask) {
		if e.Type == nomadapi.TaskDriverMessage && strings.Contains(e.DriverMessage, substr) {
			return e, nil
		}
	}
	return nil, fmt.Errorf("no %q event on %s", substr, allocID)
}

// final waits for the allocation's final line and returns its hash.
func (tr *trainer) final(t *testing.T, allocID string) string {
	t.Helper()
	var m []string
	harness.Eventually(t, 5*time.Minute, func() error {
		m = finalRe.FindStringSubmatch(tr.c.Logs(t, allocID, trainTask, "stdout"))
		if m == nil {
			return fmt.Errorf("%s has not finished training", allocID)
		}
		return nil
	})
	must.Eq(t, strconv.Itoa(trainSteps), m[1])
	return m[2]
}

// TestMigration_FiveAllocStops: the shipped batch training job is migrated
// with `nomad alloc stop` five times in a row. Expected: every stop
// checkpoints, every replacement restores the newest generation, and the
// run ends with the uninterrupted run's parameters bit for bit. Before the
// fix the batch job's default reschedule policy (one in 24 h) left the job
// dead after the second stop, without a replacement or a warning.
func TestMigration_FiveAllocStops(t *testing.T) {
	tr := newTrainer(t)
	want := tr.reference(t)
	tr.c.RunJob(t, trainJob, "caravan_bin="+tr.c.Bin, "steps="+strconv.Itoa(trainSteps), "step_delay=3ms")
	a := tr.next(t)
	for i := 1; i <= 5; i++ {
		_, err := tr.c.CLI(t, "alloc", "stop", "-detach", a.ID)
		must.NoError(t, err)
		saved := tr.event(t, a.ID, "Checkpoint saved (stop)")
		b := tr.next(t)
		restored := tr.event(t, b.ID, "Checkpoint restored")
		must.Eq(t, saved.Details["generation"], restored.Details["generation"], must.Sprintf("migration %d", i))
		t.Logf("migration %d: %s -> %s at step %s", i, a.ID[:8], b.ID[:8], saved.Details["step"])
		a = b
	}
	must.Eq(t, want, tr.final(t, a.ID), must.Sprint("final parameters differ from the uninterrupted run"))
}

// TestMigration_DrainBothNodes: a service training job is drained off one
// node, then off the other. Expected: each drain checkpoints and the
// replacement on the other node restores and continues; the final
// parameters equal an uninterrupted run's.
func TestMigration_DrainBothNodes(t *testing.T) {
	tr := newTrainer(t)
	want := tr.reference(t)
	tr.c.RunJob(t, trainJob, "caravan_bin="+tr.c.Bin, "steps="+strconv.Itoa(trainSteps), "step_delay=3ms",
		"job_type=service", "hold=true")
	a := tr.next(t)
	for i := 0; i < 2; i++ {
		node := a.NodeID
		_, err := tr.c.Nomad.Nodes().UpdateDrain(node, &nomadapi.DrainSpec{Deadline: 5 * time.Second}, false, nil)
		must.NoError(t, err)
		tr.event(t, a.ID, "Checkpoint saved (stop)")
		b := tr.next(t)
		must.NotEq(t, node, b.NodeID)
		tr.event(t, b.ID, "Checkpoint restored")
		_, err = tr.c.Nomad.Nodes().UpdateDrain(node, nil, true, nil)
		must.NoError(t, err)
		_, err = tr.c.Nomad.Nodes().ToggleEligibility(node, true, nil)
		must.NoError(t, err)
		a = b
	}
	must.Eq(t, want, tr.final(t, a.ID))
}

// TestMigration_FinitePolicyWarns: a checkpointing job whose reschedule
// policy is finite. Expected: the driver says at task start, in a task
// event, that further moves would leave the job dead mid-training.
func TestMigration_FinitePolicyWarns(t *testing.T) {
	a := newAdversary(t)
	a.run(t, handler(`:`))
	al := a.running(t)
	ev := a.event(t, al.ID, "Checkpoint warning")
	must.StrContains(t, ev.DriverMessage, "allows 0 reschedule(s)")
	must.StrContains(t, ev.DriverMessage, "unlimited = true")
}

// TestMigration_NomadServerRestartUnderLoad: the Nomad server is stopped
// and started again while the trainer trains and checkpoints. Expected: the
// task keeps running, an on-demand checkpoint after the restart is saved,
// a migration after it restores, and the final parameters are bit-exact.
func TestMigration_NomadServerRestartUnderLoad(t *testing.T) {
	tr := newTrainer(t)
	want := tr.reference(t)
	tr.c.RunJob(t, trainJob, "caravan_bin="+tr.c.Bin, "steps="+strconv.Itoa(trainSteps), "step_delay=3ms",
		"checkpoint_interval=1s")
	a := tr.next(t)
	restartServer(t, tr.c)
	// With a 1 s interval a periodic checkpoint is often in flight, and the
	// driver folds a request made then into it (no "on demand" event), so
	// the signal is sent again until an on-demand checkpoint is saved (a
	// request made while one of its own is in flight is folded into it).
	harness.Eventually(t, 2*time.Minute, func() error {
		if _, err := tr.c.CLI(t, "alloc", "signal", "-s", "SIGUSR1", a.ID, trainTask); err != nil {
			return err
		}
		_, err := tr.findEvent(t, a.ID, "Checkpoint saved (on demand)")
		return err
	})
	_, err := tr.c.CLI(t, "alloc", "stop", "-detach", a.ID)
	must.NoError(t, err)
	b := tr.next(t)
	tr.event(t, b.ID, "Checkpoint restored")
	must.Eq(t, want, tr.final(t, b.ID))
}

// restartServer stops the cluster's Nomad server (SIGTERM, as an operator
// would) and starts it again with the same command line and data dir,
// recording its new PID where scripts/cluster.sh finds it.
func restartServer(t *testing.T, c *harness.C) {
	t.Helper()
	pidFile := filepath.Join(c.Dir, "pids", "server.pid")
	b, err := os.ReadFile(pidFile)
	must.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	must.NoError(t, err)
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	must.NoError(t, err)
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	must.NoError(t, err)
	must.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
	harness.Eventually(t, time.Minute, func() error {
		if syscall.Kill(pid, 0) == nil {
			return fmt.Errorf("server %d still running", pid)
		}
		return nil
	})
	logf, err := os.OpenFile(filepath.Join(c.Dir, "logs", "server.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	must.NoError(t, err)
	defer logf.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = strings.Split(strings.TrimRight(string(env), "\x00"), "\x00")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	must.NoError(t, cmd.Start())
	must.NoError(t, os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644))
	must.NoError(t, cmd.Process.Release())
	harness.Eventually(t, 2*time.Minute, func() error {
		out, err := c.CLI(t, "operator", "api", "/v1/status/leader")
		if err != nil || !bytes.Contains([]byte(out), []byte(":")) {
			return fmt.Errorf("no leader yet: %v %s", err, out)
		}
		return nil
	})
}
