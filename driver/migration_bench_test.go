package driver

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/driver/store/s3store/s3test"
)

// BenchmarkMigration times what an operator means by migrating a
// checkpointed task from node A to node B, with a directory store and with
// an S3 store side by side in one run, at the same checkpoint sizes:
//
//	the task is stopped on A (StopTask: checkpoint signal, the final
//	commit, kill) -> the replacement starts on B (StartTask: restore,
//	executor launch) -> B's trainer prints its first training step.
//
// Two driver instances stand in for the two nodes: they share no alloc or
// task directory, only the store. "posix" is a checkpoint_store directory
// both use (a local directory standing in for the shared mount: no
// network, warm page cache, the best case of a directory store); "s3" is a
// store block on a real SeaweedFS server on loopback (s3test, on the same
// cores), where A and B share no directory at all. The S3 rows skip unless
// CARAVAN_S3_TESTS=1.
//
// The checkpoint is the trainer's small state plus a SYNTHETIC file of
// random bytes of the benchmark's size (64 MiB and 1 GiB; 8 MiB with
// -short; $CARAVAN_STORE_BENCH_BYTES if set), written into A's checkpoint
// directory before the stop, standing in for a model's weights: every byte
// is new to the store, so the commit uploads all of it. The trainer does not
// read that file after the restore, so the time to its first step does not
// include loading the weights into memory.
//
// Metrics, per migration: commit-ms and restore-ms are the driver's events'
// durations; rest-ms is everything else from the stop to the first step
// (the trainer writing its state and exiting, the executor launching B's
// trainer, its start-up and first step); stop-ms and start-ms are the two
// driver calls. ns/op (and MB/s) is the whole migration.
//
//	CARAVAN_S3_TESTS=1 go test -run '^$' -bench BenchmarkMigration -benchtime 2x ./driver
func BenchmarkMigration(b *testing.B) {
	var srv *s3test.Server
	if s3test.Enabled() {
		srv = s3test.Start(b)
	}
	stores := []struct {
		name   string
		config func(b *testing.B) *Config
	}{
		{"posix", func(b *testing.B) *Config { return &Config{CheckpointStore: b.TempDir()} }},
		{"s3", func(b *testing.B) *Config {
			if srv == nil {
				s3test.Skip(b)
			}
			creds, err := s3test.CredentialsFile(b.TempDir())
			must.NoError(b, err)
			return &Config{Store: &StoreConfig{Endpoint: srv.Endpoint, Bucket: s3test.Bucket, Prefix: s3test.NewPrefix(),
				Region: s3test.Region, PathStyle: true, CredentialsFile: creds}}
		}},
	}
	for _, size := range migrationSizes() {
		for _, st := range stores {
			b.Run(fmt.Sprintf("%s/%s", sizeName(size), st.name), func(b *testing.B) {
				benchMigration(b, st.config(b), size)
			})
		}
	}
}

// migrationSizes are the benchmark's checkpoint sizes.
func migrationSizes() []int64 {
	if v, err := strconv.ParseInt(os.Getenv("CARAVAN_STORE_BENCH_BYTES"), 10, 64); err == nil && v > 0 {
		return []int64{v}
	}
	if testing.Short() {
		return []int64{8 << 20}
	}
	return []int64{64 << 20, 1 << 30}
}

func sizeName(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%dGiB", n>>30)
	}
	return fmt.Sprintf("%dMiB", n>>20)
}

// firstStep matches a training step's progress line (not "resumed step=").
var firstStep = regexp.MustCompile(`(?m)^step=\d+ `)

func benchMigration(b *testing.B, config *Config, size int64) {
	nodeA, nodeB := newBenchDriver(b, config), newBenchDriver(b, config)
	args := []string{"-samples", "512", "-steps", "100000000", "-log-every", "1", "-step-delay", "1ms"}
	key := fmt.Sprintf("bench-migration-%d", time.Now().UnixNano())
	st, err := nodeA.d.checkpointStore() // open both stores before timing: plugins run long before a migration
	must.NoError(b, err)
	_, err = nodeB.d.checkpointStore()
	must.NoError(b, err)

	var stop, start, commit, restore, total time.Duration
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ckpt := defaultCheckpoint()
		ckpt.Key = key
		cfgA := benchTask(b, trainerTask(ckpt, args...))
		cfgB := benchTask(b, trainerTask(ckpt, args...))
		cfgB.NodeName = "client2"
		_, _, err := nodeA.d.StartTask(cfgA)
		must.NoError(b, err)
		nodeA.waitEvent(b, cfgA.ID, "starting fresh")
		writeBallast(b, filepath.Join(cfgA.TaskDir().LocalDir, checkpointDirName, "weights.bin"), size)
		waitStdoutMatch(b, cfgA, firstStep)
		b.StartTimer()

		t0 := time.Now()
		must.NoError(b, nodeA.d.StopTask(cfgA.ID, 10*time.Minute, "SIGINT"))
		stopped := time.Now()
		_, _, err = nodeB.d.StartTask(cfgB)
		must.NoError(b, err)
		started := time.Now()
		waitStdoutMatch(b, cfgB, firstStep)
		total += time.Since(t0)
		stop += stopped.Sub(t0)
		start += started.Sub(stopped)

		b.StopTimer()
		saved := nodeA.waitEvent(b, cfgA.ID, "Checkpoint saved (stop)")
		commit += annotatedDuration(b, saved)
		newBytes, err := strconv.ParseInt(saved.Annotations[annotationNewBytes], 10, 64)
		must.NoError(b, err)
		must.GreaterEq(b, size, newBytes, must.Sprint("the commit uploads every byte of the synthetic file"))
		restored := nodeB.waitEvent(b, cfgB.ID, "Checkpoint restored")
		must.Eq(b, "client1", restored.Annotations[annotationNode])
		restore += annotatedDuration(b, restored)
		must.NoError(b, nodeA.d.DestroyTask(cfgA.ID, true))
		must.NoError(b, nodeB.d.DestroyTask(cfgB.ID, true)) // killed: no checkpoint
		// The next migration starts fresh on A, and the disk stays free
		// (the alloc dirs live until the benchmark ends).
		for _, cfg := range []*drivers.TaskConfig{cfgA, cfgB} {
			must.NoError(b, os.RemoveAll(filepath.Join(cfg.TaskDir().LocalDir, checkpointDirName)))
		}
		k, err := checkpointKey(cfgA, ckpt, "")
		must.NoError(b, err)
		_, err = st.Delete(k)
		must.NoError(b, err)
		must.NoError(b, st.Sweep(context.Background()))
		b.StartTimer()
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(commit), "commit-ms")
	b.ReportMetric(ms(restore), "restore-ms")
	b.ReportMetric(ms(total-commit-restore), "rest-ms")
	b.ReportMetric(ms(stop), "stop-ms")
	b.ReportMetric(ms(start), "start-ms")
}

// benchDriver is one driver called directly (Nomad's driver harness
// wants a *testing.T), with the events it emitted. They are collected as
// they come: Nomad's eventer drops an event its consumer does not take
// within a few seconds, and a benchmark reads them only after its timed
// part.
type benchDriver struct {
	d      *Driver
	mu     sync.Mutex
	events []*drivers.TaskEvent
}

// newBenchDriver starts an enabled driver with config (no periodic GC; the
// tasks name their checkpoints, so no Nomad API is needed). Tasks still
// running when the benchmark ends are destroyed.
func newBenchDriver(b *testing.B, config *Config) *benchDriver {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := *config
	c.Enabled, c.CheckpointRetain, c.CheckpointGCInterval = true, 3, "0s"
	bd := &benchDriver{d: NewDriver(ctx, hclog.NewNullLogger())}
	b.Cleanup(func() {
		for _, id := range bd.taskIDs() {
			_ = bd.d.DestroyTask(id, true)
		}
		cancel()
	})
	var data []byte
	must.NoError(b, base.MsgPackEncode(&data, &c))
	must.NoError(b, bd.d.SetConfig(&base.Config{
		PluginConfig: data,
		AgentConfig:  &base.AgentConfig{Driver: &base.ClientDriverConfig{}},
	}))
	events, err := bd.d.TaskEvents(ctx)
	must.NoError(b, err)
	go func() {
		for ev := range events {
			bd.mu.Lock()
			bd.events = append(bd.events, ev)
			bd.mu.Unlock()
		}
	}()
	return bd
}

func (bd *benchDriver) taskIDs() []string {
	bd.d.tasks.lock.RLock()
	defer bd.d.tasks.lock.RUnlock()
	ids := make([]string, 0, len(bd.d.tasks.store))
	for id := range bd.d.tasks.store {
		ids = append(ids, id)
	}
	return ids
}

// waitEvent returns the first event of task id whose message contains
// substr.
func (bd *benchDriver) waitEvent(b *testing.B, id, substr string) *drivers.TaskEvent {
	b.Helper()
	var found *drivers.TaskEvent
	must.Wait(b, wait.InitialSuccess(wait.BoolFunc(func() bool {
		bd.mu.Lock()
		defer bd.mu.Unlock()
		for _, ev := range bd.events {
			if ev.TaskID == id && strings.Contains(ev.Message, substr) {
				found = ev
				return true
			}
		}
		return false
	}), wait.Timeout(5*time.Minute), wait.Gap(5*time.Millisecond)), must.Sprintf("no %q event for task %s", substr, id))
	return found
}

func annotatedDuration(b *testing.B, ev *drivers.TaskEvent) time.Duration {
	b.Helper()
	d, err := time.ParseDuration(ev.Annotations[annotationDuration])
	must.NoError(b, err)
	return d
}

// waitStdoutMatch waits until the task's stdout matches re.
func waitStdoutMatch(b *testing.B, cfg *drivers.TaskConfig, re *regexp.Regexp) {
	b.Helper()
	must.Wait(b, wait.InitialSuccess(wait.BoolFunc(func() bool {
		out, _ := os.ReadFile(cfg.StdoutPath)
		return re.Match(out)
	}), wait.Timeout(5*time.Minute), wait.Gap(2*time.Millisecond)))
}

// writeBallast writes size SYNTHETIC random bytes to path, new to the
// store every time (a fresh seed).
func writeBallast(b *testing.B, path string, size int64) {
	b.Helper()
	f, err := os.Create(path)
	must.NoError(b, err)
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(time.Now().UnixNano()))
	_, err = io.CopyN(f, rand.NewChaCha8(seed), size)
	must.NoError(b, err)
	must.NoError(b, f.Close())
}
