package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/client/allocdir"
	"github.com/hashicorp/nomad/helper/uuid"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"
)

// BenchmarkSuspendResume measures the driver's own share of a suspend ->
// resume cycle of the trainer with a 4.2 MiB state (512x512 hidden layer,
// parameters and momentum), through Nomad's driver harness:
//
//   - stop-ms:   StopTask with its checkpoint (signal, the trainer writing its
//     state, the commit, kill_signal, exit);
//   - task-write-ms: within it, signal to marker (the trainer's own work);
//   - commit-ms: the commit to the store within it (the driver's work);
//   - start-ms:  StartTask (restore into the checkpoint dir, executor launch);
//   - restore-ms: the restore within it (the driver's work).
//
// The task names its checkpoints (checkpoint.key), so no Nomad agent is
// needed to learn the job's incarnation.
//
// ns/op is stop + start. The rest of a cycle on a real cluster is Nomad's
// scheduling and the trainer's own start-up (see e2e/driver for the
// end-to-end numbers).
func BenchmarkSuspendResume(b *testing.B) {
	bd := newBenchDriver(b, &Config{CheckpointStore: b.TempDir()})
	d := bd.d
	args := []string{"-features", "512", "-hidden", "512", "-samples", "512", "-steps", "100000000", "-log-every", "1", "-step-delay", "1ms"}

	var stop, start, commit, restore, taskWrite time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ckpt := defaultCheckpoint()
		ckpt.Key = "bench-suspend-resume"
		cfg := benchTask(b, trainerTask(ckpt, args...))
		b.StartTimer()

		t0 := time.Now()
		_, _, err := d.StartTask(cfg)
		must.NoError(b, err)
		start += time.Since(t0)
		if i > 0 {
			restore += annotatedDuration(b, bd.waitEvent(b, cfg.ID, "Checkpoint restored"))
		}

		b.StopTimer()
		must.Wait(b, wait.InitialSuccess(wait.BoolFunc(func() bool { // the trainer handles the signal from here
			out, _ := os.ReadFile(cfg.StdoutPath)
			return strings.Contains(string(out), "step=")
		}), wait.Timeout(time.Minute), wait.Gap(5*time.Millisecond)))
		b.StartTimer()

		t0 = time.Now()
		must.NoError(b, d.StopTask(cfg.ID, 30*time.Second, "SIGINT"))
		stop += time.Since(t0)
		ev := bd.waitEvent(b, cfg.ID, "Checkpoint saved (stop)")
		commit += annotatedDuration(b, ev)
		dur, err := time.ParseDuration(ev.Annotations[annotationTaskDuration])
		must.NoError(b, err)
		taskWrite += dur

		b.StopTimer()
		must.NoError(b, d.DestroyTask(cfg.ID, true))
		b.StartTimer()
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(stop), "stop-ms")
	b.ReportMetric(ms(commit), "commit-ms")
	b.ReportMetric(ms(taskWrite), "task-write-ms")
	b.ReportMetric(ms(start), "start-ms")
	if b.N > 1 {
		b.ReportMetric(float64(restore.Microseconds())/1000/(n-1), "restore-ms")
	}
}

// benchTask builds a task with its alloc dir for the driver called directly
// (the harness wants a *testing.T); stdout and stderr go to plain files.
func benchTask(b *testing.B, tc *TaskConfig) *drivers.TaskConfig {
	b.Helper()
	allocID := uuid.Generate()
	root := b.TempDir()
	ad := allocdir.NewAllocDir(hclog.NewNullLogger(), root, allocID)
	must.NoError(b, ad.Build())
	td := ad.NewTaskDir("t")
	must.NoError(b, td.Build(false, nil))
	b.Cleanup(func() { _ = ad.Destroy() })
	cfg := &drivers.TaskConfig{
		ID: uuid.Generate(), AllocID: allocID, Name: "t", JobName: "train", JobID: "train",
		TaskGroupName: "g", Namespace: "default", NodeName: "client1", AllocDir: ad.AllocDir,
		Env:        map[string]string{"NOMAD_ALLOC_INDEX": "0"},
		Resources:  testResources(allocID, "t"),
		StdoutPath: filepath.Join(td.LogDir, "t.stdout"),
		StderrPath: filepath.Join(td.LogDir, "t.stderr"),
	}
	for _, p := range []string{cfg.StdoutPath, cfg.StderrPath} {
		must.NoError(b, os.WriteFile(p, nil, 0o644))
	}
	must.NoError(b, cfg.EncodeConcreteDriverConfig(tc))
	return cfg
}
