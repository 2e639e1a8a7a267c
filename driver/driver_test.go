package driver

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/helper/testlog"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	dtestutil "github.com/hashicorp/nomad/plugins/drivers/testutils"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/protocol"
	"github.com/caravan-nomad/caravan/driver/store"
)

func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(dir, store.Options{ChunkSize: 4096})
	must.NoError(t, err)
	return st
}

// testKey is the key of newTask's tasks: job "train" in its first
// incarnation (the fake Nomad's create index 1).
var testKey = store.Key{Namespace: "default", Job: "train", Group: "g", Task: "t", Index: 0, Incarnation: "1"}

func TestDriver_Fingerprint(t *testing.T) {
	cases := []struct {
		name  string
		store string
		want  bool
	}{
		{"store reachable", t.TempDir(), true},
		{"store missing", filepath.Join(t.TempDir(), "nope"), false},
		{"no store", "", false},
		{"store gone after opening", "gone", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.store
			if dir == "gone" {
				dir = t.TempDir()
			}
			td := newTestDriver(t, dir)
			if tc.store == "gone" {
				_, err := td.d.checkpointStore() // opened...
				must.NoError(t, err)
				must.NoError(t, os.RemoveAll(dir)) // ...then the share goes away
			}
			ch, err := td.Fingerprint(context.Background())
			must.NoError(t, err)
			fp := <-ch
			must.Eq(t, drivers.HealthStateHealthy, fp.Health)
			v, ok := fp.Attributes["driver.caravan.checkpoint_store"].GetBool()
			must.True(t, ok)
			must.Eq(t, tc.want, v)
		})
	}
}

func TestDriver_SetConfigNamesBadField(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{CheckpointStore: "relative/dir", CheckpointRetain: 3, CheckpointGCInterval: "1m"}, "checkpoint_store"},
		{Config{CheckpointRetain: 0, CheckpointGCInterval: "1m"}, "checkpoint_retain"},
		{Config{CheckpointRetain: 1, CheckpointChunkSize: -1, CheckpointGCInterval: "1m"}, "checkpoint_chunk_size"},
		{Config{CheckpointRetain: 1, CheckpointChunkSize: 100, CheckpointGCInterval: "1m"}, "checkpoint_chunk_size"},
		{Config{CheckpointRetain: 1, CheckpointGCInterval: "soon"}, "checkpoint_gc_interval"},
		{Config{CheckpointRetain: 1, CheckpointGCInterval: "1m", NomadAddress: "127.0.0.1:4646"}, "nomad_address"},
		{Config{CheckpointRetain: 1, CheckpointGCInterval: "1m", NomadToken: "a", NomadTokenFile: "/b"}, "nomad_token_file"},
		{Config{CheckpointRetain: 1, CheckpointGCInterval: "1m", NomadTokenFile: "rel/token"}, "nomad_token_file"},
		{Config{CheckpointRetain: 1, CheckpointGCInterval: "1m", MetricsAddress: "0.0.0.0:9102"}, "metrics_address"},
		{Config{CheckpointRetain: 1, CheckpointGCInterval: "1m", MetricsAddress: "9102"}, "metrics_address"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			d := NewDriver(context.Background(), testlog.HCLogger(t))
			h := dtestutil.NewDriverHarness(t, d)
			var data []byte
			must.NoError(t, base.MsgPackEncode(&data, &tc.cfg))
			err := h.SetConfig(&base.Config{PluginConfig: data})
			must.ErrorContains(t, err, tc.want)
		})
	}
}

func TestDriver_BadTaskConfigNamesField(t *testing.T) {
	ck := func(mut func(*CheckpointConfig)) *CheckpointConfig {
		c := defaultCheckpoint()
		mut(c)
		return c
	}
	cases := []struct {
		tc   *TaskConfig
		want string
	}{
		{&TaskConfig{}, "command"},
		{&TaskConfig{Command: "/bin/true", WorkDir: "rel"}, "work_dir"},
		{&TaskConfig{Command: "/bin/true", OOMScoreAdj: -1}, "oom_score_adj"},
		{&TaskConfig{Command: "/bin/true", Checkpoint: ck(func(c *CheckpointConfig) { c.Signal = "SIGNOPE" })}, "checkpoint.signal"},
		{&TaskConfig{Command: "/bin/true", Checkpoint: ck(func(c *CheckpointConfig) { c.Signal = "SIGKILL" })}, "checkpoint.signal"},
		{&TaskConfig{Command: "/bin/true", Checkpoint: ck(func(c *CheckpointConfig) { c.Interval = "often" })}, "checkpoint.interval"},
		{&TaskConfig{Command: "/bin/true", Checkpoint: ck(func(c *CheckpointConfig) { c.Timeout = "0s" })}, "checkpoint.timeout"},
		{&TaskConfig{Command: "/bin/true", Checkpoint: ck(func(c *CheckpointConfig) { c.OnRestoreError = "retry" })}, "checkpoint.on_restore_error"},
		{&TaskConfig{Command: "/bin/true", Checkpoint: ck(func(c *CheckpointConfig) { c.Scope = "job" })}, "checkpoint.scope"},
		{&TaskConfig{Command: "/bin/true", Checkpoint: ck(func(c *CheckpointConfig) { c.Key = " padded" })}, "checkpoint.key"},
		{&TaskConfig{Command: "/bin/true", Checkpoint: ck(func(c *CheckpointConfig) { c.Key = "tab\there" })}, "checkpoint.key"},
		{&TaskConfig{Command: "/bin/true", Checkpoint: ck(func(c *CheckpointConfig) { c.Key = strings.Repeat("k", 81) })}, "checkpoint.key"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			td := newTestDriver(t, t.TempDir()) // a task's cleanup closes its harness
			cfg := newTask(t, td, "client1", tc.tc)
			_, _, err := td.StartTask(cfg)
			must.ErrorContains(t, err, tc.want)
		})
	}
}

func TestDriver_TaskConfigSchemaParses(t *testing.T) {
	spec, err := NewDriver(context.Background(), testlog.HCLogger(t)).TaskConfigSchema()
	must.NoError(t, err)
	must.NotNil(t, spec)
	cfgSpec, err := NewDriver(context.Background(), testlog.HCLogger(t)).ConfigSchema()
	must.NoError(t, err)
	must.NotNil(t, cfgSpec)
}

func TestDriver_CheckpointBlockWithoutStoreIsRefused(t *testing.T) {
	td := newTestDriver(t, "")
	cfg := newTask(t, td, "client1", trainerTask(defaultCheckpoint()))
	_, _, err := td.d.StartTask(cfg) // the implementation, to check the error's identity
	must.ErrorIs(t, err, errNoStore)
	_, _, err = td.StartTask(cfg) // through gRPC the message survives
	must.ErrorContains(t, err, "no checkpoint_store configured")
}

func TestDriver_StartWaitExitCode(t *testing.T) {
	td := newTestDriver(t, "")
	cfg := newTask(t, td, "client1", &TaskConfig{Command: "/bin/sh", Args: []string{"-c", "echo hello; exit 3"}})
	_, _, err := td.StartTask(cfg)
	must.NoError(t, err)
	res := td.waitExit(t, cfg.ID)
	must.Eq(t, 3, res.ExitCode)
	waitStdout(t, cfg, "hello")
	must.NoError(t, td.DestroyTask(cfg.ID, false))
	_, err = td.d.InspectTask(cfg.ID)
	must.ErrorIs(t, err, drivers.ErrTaskNotFound)
}

func TestDriver_ExecSignalStats(t *testing.T) {
	td := newTestDriver(t, "")
	cfg := newTask(t, td, "client1", &TaskConfig{Command: "/bin/sh", Args: []string{"-c", "trap 'exit 7' USR2; while :; do sleep 0.1; done"}})
	_, _, err := td.StartTask(cfg)
	must.NoError(t, err)
	must.NoError(t, td.WaitUntilStarted(cfg.ID, 10*time.Second))

	res, err := td.ExecTask(cfg.ID, []string{"/bin/sh", "-c", "echo in-task $NOMAD_TASK_NAME"}, 10*time.Second)
	must.NoError(t, err)
	must.Eq(t, 0, res.ExitResult.ExitCode)
	must.StrContains(t, string(res.Stdout), "in-task t")

	ctx, cancel := context.WithCancel(context.Background())
	statsCh, err := td.TaskStats(ctx, cfg.ID, 100*time.Millisecond)
	must.NoError(t, err)
	select {
	case ru := <-statsCh:
		must.NotNil(t, ru.ResourceUsage)
	case <-time.After(10 * time.Second):
		t.Fatal("no stats")
	}
	cancel()

	_, err = td.ExecTask(cfg.ID, nil, time.Second)
	must.Error(t, err)
	must.Error(t, td.SignalTask(cfg.ID, "SIGBOGUS"))

	must.NoError(t, td.SignalTask(cfg.ID, "SIGUSR2"))
	exit := td.waitExit(t, cfg.ID)
	must.Eq(t, 7, exit.ExitCode)
}

// TestDriver_StopCheckpointsAndResumeIsBitForBit suspends the trainer by
// stopping its task, resumes it as a new allocation on another node, does
// that again, and checks the final parameters equal an uninterrupted run.
func TestDriver_StopCheckpointsAndResumeIsBitForBit(t *testing.T) {
	const steps = 1500
	want := referenceHash(t, steps)
	storeDir := t.TempDir()
	td := newTestDriver(t, storeDir)
	args := trainerArgs(steps, "1ms")

	for i, node := range []string{"client1", "client2"} {
		cfg := newTask(t, td, node, trainerTask(defaultCheckpoint(), args...))
		_, _, err := td.StartTask(cfg)
		must.NoError(t, err)
		if i > 0 {
			ev := td.waitEvent(t, "Checkpoint restored")
			must.Eq(t, "client1", ev.Annotations[annotationNode])
			waitStdout(t, cfg, "resumed step=")
		}
		waitStdout(t, cfg, "step=")
		must.NoError(t, td.StopTask(cfg.ID, 20*time.Second, "SIGTERM"))
		ev := td.waitEvent(t, "Checkpoint saved (stop)")
		must.Eq(t, reasonStop, ev.Annotations[annotationReason])
		must.NotEq(t, "", ev.Annotations[annotationStep])
		must.NoError(t, td.DestroyTask(cfg.ID, true))
	}

	m, err := openStore(t, storeDir).Latest(testKey)
	must.NoError(t, err)
	must.Eq(t, uint64(2), m.Generation)
	must.Eq(t, "client2", m.Node)
	must.Eq(t, "2", m.Meta["sequence"])

	cfg := newTask(t, td, "client1", trainerTask(defaultCheckpoint(), args...))
	_, _, err = td.StartTask(cfg)
	must.NoError(t, err)
	res := td.waitExit(t, cfg.ID)
	must.Eq(t, 0, res.ExitCode, must.Sprint(stdout(t, cfg)))
	waitStdout(t, cfg, "final step=")
	must.StrContains(t, stdout(t, cfg), "resumed step="+m.Meta["step"])
	must.Eq(t, want, finalHash(t, stdout(t, cfg)))
	checkCheckpointMetrics(t, td.d.metrics)
}

func TestDriver_OnDemandAndPeriodicCheckpoints(t *testing.T) {
	storeDir := t.TempDir()
	td := newTestDriver(t, storeDir)

	// On demand: the checkpoint signal through SignalTask.
	cfg := newTask(t, td, "client1", trainerTask(defaultCheckpoint(), trainerArgs(1_000_000, "1ms")...))
	_, _, err := td.StartTask(cfg)
	must.NoError(t, err)
	waitStdout(t, cfg, "step=")
	must.NoError(t, td.SignalTask(cfg.ID, "SIGUSR1"))
	ev := td.waitEvent(t, "Checkpoint saved (on demand)")
	must.Eq(t, reasonOnDemand, ev.Annotations[annotationReason])
	must.NotEq(t, "", ev.Annotations[annotationTaskDuration])
	status, err := td.InspectTask(cfg.ID)
	must.NoError(t, err)
	must.Eq(t, testKey.String(), status.DriverAttributes["checkpoint_key"])

	// A signal that is not the checkpoint signal is forwarded.
	exitCh, err := td.WaitTask(context.Background(), cfg.ID)
	must.NoError(t, err)
	must.NoError(t, td.SignalTask(cfg.ID, "SIGINT"))
	res := <-exitCh
	must.Eq(t, 128+int(syscall.SIGINT), res.ExitCode)
	must.NoError(t, td.DestroyTask(cfg.ID, true))

	// Periodic: every interval, generations keep coming.
	ck := defaultCheckpoint()
	ck.Interval = "300ms"
	cfg = newTask(t, td, "client1", trainerTask(ck, trainerArgs(1_000_000, "1ms")...))
	_, _, err = td.StartTask(cfg)
	must.NoError(t, err)
	waitStdout(t, cfg, "resumed step=")
	td.waitEvent(t, "Checkpoint saved (periodic)")
	td.waitEvent(t, "Checkpoint saved (periodic)")
	ms, err := openStore(t, storeDir).List(testKey)
	must.NoError(t, err)
	must.GreaterEq(t, uint64(3), ms[len(ms)-1].Generation)
}

// TestDriver_RecoverAfterPluginRestart kills the plugin (harness and
// context) while the task runs, recovers the task with a second driver
// instance, and checkpoints and stops it through that one.
func TestDriver_RecoverAfterPluginRestart(t *testing.T) {
	storeDir := t.TempDir()
	td := newTestDriver(t, storeDir)
	cfg := newTask(t, td, "client1", trainerTask(defaultCheckpoint(), trainerArgs(1_000_000, "1ms")...))
	handle, _, err := td.StartTask(cfg)
	must.NoError(t, err)
	waitStdout(t, cfg, "step=")
	must.NoError(t, td.SignalTask(cfg.ID, "SIGUSR1"))
	td.waitEvent(t, "Checkpoint saved (on demand)")
	status, err := td.InspectTask(cfg.ID)
	must.NoError(t, err)
	pid := status.DriverAttributes["pid"]

	td.kill()

	// While the plugin is down the task completes a checkpoint nobody
	// commits (the trainer answers its signal on its own).
	pidN, err := strconv.Atoi(pid)
	must.NoError(t, err)
	must.NoError(t, syscall.Kill(pidN, syscall.SIGUSR1))
	waitStdout(t, cfg, "sequence=2")

	td2 := newTestDriver(t, storeDir)
	must.NoError(t, td2.RecoverTask(handle))
	must.NoError(t, td2.RecoverTask(handle)) // idempotent
	status, err = td2.InspectTask(cfg.ID)
	must.NoError(t, err)
	must.Eq(t, drivers.TaskStateRunning, status.State)
	must.Eq(t, pid, status.DriverAttributes["pid"])
	// The orphaned checkpoint is committed on recovery.
	ev := td2.waitEvent(t, "Checkpoint saved (recovered)")
	must.Eq(t, "2", ev.Annotations[annotationGeneration])
	status, err = td2.InspectTask(cfg.ID)
	must.NoError(t, err)
	must.Eq(t, "2", status.DriverAttributes["checkpoint_sequence"])

	must.NoError(t, td2.StopTask(cfg.ID, 20*time.Second, "SIGTERM"))
	ev = td2.waitEvent(t, "Checkpoint saved (stop)")
	must.Eq(t, "3", ev.Annotations[annotationGeneration])
	m, err := protocol.ReadMarker(filepath.Join(cfg.TaskDir().LocalDir, checkpointDirName))
	must.NoError(t, err)
	must.Eq(t, uint64(3), m.Sequence)
	must.NoError(t, td2.DestroyTask(cfg.ID, true))
}

func TestDriver_RecoverRefusesOtherHandleVersion(t *testing.T) {
	td := newTestDriver(t, "")
	h := drivers.NewTaskHandle(taskHandleVersion + 1)
	h.Config = &drivers.TaskConfig{ID: "x"}
	err := td.RecoverTask(h)
	must.ErrorContains(t, err, "handle version")
}

// TestDriver_CheckpointTimeoutKeepsPreviousAndStillStops: a task that
// ignores the checkpoint signal gets a "failed" event and is stopped within
// the kill timeout, and the store keeps what it had.
func TestDriver_CheckpointTimeoutKeepsPreviousAndStillStops(t *testing.T) {
	storeDir := t.TempDir()
	td := newTestDriver(t, storeDir)
	cfg := newTask(t, td, "client1", &TaskConfig{
		Command:    "/bin/sh",
		Args:       []string{"-c", "trap '' USR1; echo ready; while :; do sleep 0.1; done"},
		Checkpoint: defaultCheckpoint(),
	})
	_, _, err := td.StartTask(cfg)
	must.NoError(t, err)
	waitStdout(t, cfg, "ready")
	start := time.Now()
	must.NoError(t, td.StopTask(cfg.ID, 2*time.Second, "SIGTERM"))
	must.Less(t, 5*time.Second, time.Since(start))
	ev := td.waitEvent(t, "Checkpoint failed (stop)")
	must.StrContains(t, ev.Message, "timed out")
	must.StrContains(t, ev.Message, "no earlier checkpoint")
	_, err = openStore(t, storeDir).Latest(testKey)
	must.ErrorIs(t, err, store.ErrNoCheckpoint)
}

// TestDriver_CorruptNewestFallsBack corrupts a chunk of the newest
// generation: the next start restores the one before, with an event.
func TestDriver_CorruptNewestFallsBack(t *testing.T) {
	storeDir := t.TempDir()
	td := newTestDriver(t, storeDir)
	args := trainerArgs(1_000_000, "1ms")
	cfg := newTask(t, td, "client1", trainerTask(defaultCheckpoint(), args...))
	_, _, err := td.StartTask(cfg)
	must.NoError(t, err)
	waitStdout(t, cfg, "step=") // the trainer handles the signal from here on
	for range 2 {
		must.NoError(t, td.SignalTask(cfg.ID, "SIGUSR1"))
		td.waitEvent(t, "Checkpoint saved (on demand)")
		td.waitIdle(t, cfg.ID) // a request while one is in flight is folded into it
	}
	must.NoError(t, td.StopTask(cfg.ID, 20*time.Second, "SIGTERM"))
	td.waitEvent(t, "Checkpoint saved (stop)")
	must.NoError(t, td.DestroyTask(cfg.ID, true))

	st := openStore(t, storeDir)
	newest, err := st.Latest(testKey)
	must.NoError(t, err)
	must.Eq(t, uint64(3), newest.Generation)
	// Flip a byte in a chunk only the newest generation's state file has.
	ms, err := st.List(testKey)
	must.NoError(t, err)
	older := map[string]bool{}
	for _, m := range ms[:len(ms)-1] {
		for _, f := range m.Files {
			for _, c := range f.Chunks {
				older[c] = true
			}
		}
	}
	corrupted := false
	for _, f := range newest.Files {
		for _, c := range f.Chunks {
			if !older[c] && !corrupted {
				p := filepath.Join(storeDir, ".chunks", c[:2], c)
				b, err := os.ReadFile(p)
				must.NoError(t, err)
				b[0] ^= 0xff
				must.NoError(t, os.Chmod(p, 0o644))
				must.NoError(t, os.WriteFile(p, b, 0o644))
				corrupted = true
			}
		}
	}
	must.True(t, corrupted)

	cfg2 := newTask(t, td, "client2", trainerTask(defaultCheckpoint(), args...))
	_, _, err = td.StartTask(cfg2)
	must.NoError(t, err)
	ev := td.waitEvent(t, "failed verification, fell back to generation 2")
	must.Eq(t, "2", ev.Annotations[annotationGeneration])
	ev = td.waitEvent(t, "Checkpoint restored")
	must.Eq(t, "2", ev.Annotations[annotationGeneration])
	waitStdout(t, cfg2, "resumed step=")
	must.NoError(t, td.StopTask(cfg2.ID, 20*time.Second, "SIGTERM"))
	must.NoError(t, td.DestroyTask(cfg2.ID, true))
}

func TestDriver_UnreachableStore(t *testing.T) {
	cases := []struct {
		policy  string
		wantErr bool
	}{
		{OnRestoreErrorFail, true},
		{OnRestoreErrorStartFresh, false},
	}
	for _, tc := range cases {
		t.Run(tc.policy, func(t *testing.T) {
			storeDir := filepath.Join(t.TempDir(), "mnt")
			must.NoError(t, os.Mkdir(storeDir, 0o755))
			td := newTestDriver(t, storeDir)
			must.NoError(t, os.RemoveAll(storeDir)) // the share goes away

			ck := defaultCheckpoint()
			ck.OnRestoreError = tc.policy
			cfg := newTask(t, td, "client1", trainerTask(ck, trainerArgs(10, "0s")...))
			_, _, err := td.d.StartTask(cfg)
			if tc.wantErr {
				must.ErrorIs(t, err, store.ErrUnavailable)
				must.StrContains(t, err.Error(), "on_restore_error")
				return
			}
			must.NoError(t, err)
			td.waitEvent(t, "starting fresh")
			res := td.waitExit(t, cfg.ID)
			must.Eq(t, 0, res.ExitCode)
		})
	}
}

func TestDriver_SIGTERMStyleCheckpoint(t *testing.T) {
	storeDir := t.TempDir()
	td := newTestDriver(t, storeDir)
	ck := defaultCheckpoint()
	ck.Signal = "SIGTERM"
	cfg := newTask(t, td, "client1", trainerTask(ck, trainerArgs(1_000_000, "1ms")...))
	_, _, err := td.StartTask(cfg)
	must.NoError(t, err)
	waitStdout(t, cfg, "step=")
	exitCh, err := td.WaitTask(context.Background(), cfg.ID)
	must.NoError(t, err)
	must.NoError(t, td.StopTask(cfg.ID, 20*time.Second, "SIGTERM"))
	td.waitEvent(t, "Checkpoint saved (stop)")
	res := <-exitCh
	must.Eq(t, 128+int(syscall.SIGTERM), res.ExitCode)
	waitStdout(t, cfg, "checkpoint step=")
}
