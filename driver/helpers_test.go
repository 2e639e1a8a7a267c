package driver

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/helper/testlog"
	"github.com/hashicorp/nomad/helper/uuid"
	nstructs "github.com/hashicorp/nomad/nomad/structs"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	dtestutil "github.com/hashicorp/nomad/plugins/drivers/testutils"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/trainer"
)

// TestMain lets the test binary act as the trainer task (`driver.test
// trainer ...`); the executor's own init() makes it act as `executor` too.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "trainer" {
		os.Exit(trainer.Main(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == TaskExecCommand {
		os.Exit(TaskExecMain(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

// testDriver is a driver behind Nomad's driver harness (the real gRPC
// plugin boundary), with its event stream and a fake Nomad API.
type testDriver struct {
	*dtestutil.DriverHarness
	d      *Driver
	nomad  *fakeNomad
	events <-chan *drivers.TaskEvent
	cancel context.CancelFunc
	killed bool
}

// fakeNomad serves the one Nomad API call the driver makes,
// GET /v1/allocation/:id, for allocations of job "train" whose create index
// is index (a purge and resubmission changes it). down makes it fail.
type fakeNomad struct {
	*httptest.Server
	index atomic.Uint64
	down  atomic.Bool
	token string // required X-Nomad-Token, if set
	// allocs is what GET /v1/job/train/allocations lists (nil: none).
	allocs atomic.Pointer[[]map[string]any]
	// job is what GET /v1/job/train answers (nil: 404).
	job atomic.Pointer[api.Job]
}

func newFakeNomad(t *testing.T) *fakeNomad {
	t.Helper()
	f := &fakeNomad{}
	f.index.Store(1)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/v1/allocation/")
		switch {
		case f.down.Load():
			http.Error(w, "no cluster leader", http.StatusInternalServerError)
		case f.token != "" && r.Header.Get("X-Nomad-Token") != f.token:
			http.Error(w, "Permission denied", http.StatusForbidden)
		case r.URL.Path == "/v1/job/train/allocations" && r.URL.Query().Get("namespace") == "default":
			list := []map[string]any{}
			if p := f.allocs.Load(); p != nil {
				list = *p
			}
			_ = json.NewEncoder(w).Encode(list)
		case r.URL.Path == "/v1/job/train" && f.job.Load() != nil:
			_ = json.NewEncoder(w).Encode(f.job.Load())
		case !ok || r.URL.Query().Get("namespace") != "default":
			http.NotFound(w, r)
		default:
			ci := f.index.Load()
			_ = json.NewEncoder(w).Encode(map[string]any{
				"ID": id, "JobID": "train", "Namespace": "default",
				"Job": map[string]any{"ID": "train", "CreateIndex": ci},
			})
		}
	}))
	t.Cleanup(f.Close)
	return f
}

// newTestDriver starts a driver whose store is storeDir ("" for none).
func newTestDriver(t *testing.T, storeDir string) *testDriver {
	t.Helper()
	return newTestDriverWith(t, &Config{CheckpointStore: storeDir})
}

// newTestDriverWith starts an enabled driver with config (test defaults
// for the fields left zero, and a fake Nomad API unless NomadAddress is
// set).
func newTestDriverWith(t *testing.T, config *Config) *testDriver {
	t.Helper()
	c := *config
	c.Enabled = true
	return newTestDriverRaw(t, &c)
}

// newTestDriverRaw is newTestDriverWith without turning the driver on.
func newTestDriverRaw(t *testing.T, config *Config) *testDriver {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := NewDriver(ctx, testlog.HCLogger(t))
	h := dtestutil.NewDriverHarness(t, d)
	c := *config
	c.CheckpointRetain = cmp.Or(c.CheckpointRetain, 3)
	c.CheckpointChunkSize = cmp.Or(c.CheckpointChunkSize, 4096)
	c.CheckpointGCInterval = cmp.Or(c.CheckpointGCInterval, "0s")
	var fake *fakeNomad
	if c.NomadAddress == "" {
		fake = newFakeNomad(t)
		c.NomadAddress = fake.URL
	}
	var data []byte
	must.NoError(t, base.MsgPackEncode(&data, &c))
	must.NoError(t, h.SetConfig(&base.Config{
		PluginConfig: data,
		AgentConfig:  &base.AgentConfig{Driver: &base.ClientDriverConfig{}},
	}))
	evs, err := h.TaskEvents(ctx)
	must.NoError(t, err)
	td := &testDriver{DriverHarness: h, d: d, nomad: fake, events: evs, cancel: cancel}
	t.Cleanup(func() {
		if !td.killed {
			// Leave no executor or task process behind.
			td.d.tasks.lock.RLock()
			ids := make([]string, 0, len(td.d.tasks.store))
			for id := range td.d.tasks.store {
				ids = append(ids, id)
			}
			td.d.tasks.lock.RUnlock()
			for _, id := range ids {
				_ = td.d.DestroyTask(id, true)
			}
		}
		// No h.Kill(): closing the harness client makes the plugin stop its
		// gRPC server while Kill stops it too, a race inside go-plugin. A
		// task's alloc dir cleanup closes the client; the in-process
		// server dies with the test binary.
		cancel()
	})
	return td
}

// kill simulates the plugin process dying: the driver's context is
// cancelled and the test stops using it; the executors (separate processes)
// live on for a second driver to recover.
func (td *testDriver) kill() {
	td.killed = true
	td.cancel()
}

func testResources(allocID, task string) *drivers.Resources {
	return &drivers.Resources{
		NomadResources: &nstructs.AllocatedTaskResources{
			Memory: nstructs.AllocatedMemoryResources{MemoryMB: 256},
			Cpu:    nstructs.AllocatedCpuResources{CpuShares: 100},
		},
		LinuxResources: &drivers.LinuxResources{
			MemoryLimitBytes: 256 << 20,
			CPUShares:        100,
		},
	}
}

// newTask builds a task of job "train", group "g", task "t", alloc index 0,
// on node, with its alloc dir and logs, and the given driver config.
func newTask(t *testing.T, td *testDriver, node string, tc *TaskConfig) *drivers.TaskConfig {
	t.Helper()
	allocID := uuid.Generate()
	cfg := &drivers.TaskConfig{
		ID:            uuid.Generate(),
		AllocID:       allocID,
		Name:          "t",
		JobName:       "train",
		JobID:         "train",
		TaskGroupName: "g",
		Namespace:     "default",
		NodeName:      node,
		// As a client sets them: the executor names the task's cgroup
		// from them on cgroups v2.
		Env: map[string]string{"NOMAD_ALLOC_INDEX": "0", "NOMAD_ALLOC_NAME": "train.g[0]",
			"NOMAD_ALLOC_ID": allocID, "NOMAD_TASK_NAME": "t", "NOMAD_PARENT_CGROUP": "nomad.slice"},
		Resources: testResources(allocID, "t"),
	}
	cleanup := td.MkAllocDir(cfg, true)
	t.Cleanup(cleanup)
	must.NoError(t, cfg.EncodeConcreteDriverConfig(tc))
	return cfg
}

// trainerTask runs the test binary as `caravan trainer`.
func trainerTask(ckpt *CheckpointConfig, args ...string) *TaskConfig {
	return &TaskConfig{Command: os.Args[0], Args: append([]string{"trainer"}, args...), Checkpoint: ckpt}
}

func defaultCheckpoint() *CheckpointConfig {
	return &CheckpointConfig{Signal: "SIGUSR1", Timeout: "20s", OnRestoreError: OnRestoreErrorFail}
}

// stdout reads the task's stdout log so far.
func stdout(t *testing.T, cfg *drivers.TaskConfig) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(cfg.TaskDir().LogDir, cfg.Name+".stdout.0"))
	return string(b)
}

func waitStdout(t *testing.T, cfg *drivers.TaskConfig, substr string) {
	t.Helper()
	must.Wait(t, wait.InitialSuccess(
		wait.BoolFunc(func() bool { return strings.Contains(stdout(t, cfg), substr) }),
		wait.Timeout(60*time.Second), wait.Gap(20*time.Millisecond),
	), must.Sprintf("waiting for %q in stdout %q", substr, stdout(t, cfg)))
}

// waitEvent returns the first event whose message contains substr.
func (td *testDriver) waitEvent(t *testing.T, substr string) *drivers.TaskEvent {
	t.Helper()
	timeout := time.After(60 * time.Second)
	var seen []string
	for {
		select {
		case ev := <-td.events:
			seen = append(seen, ev.Message)
			if strings.Contains(ev.Message, substr) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no event containing %q; saw %q", substr, seen)
			return nil
		}
	}
}

// waitIdle waits until no checkpoint of the task is in flight.
func (td *testDriver) waitIdle(t testing.TB, taskID string) {
	t.Helper()
	h, ok := td.d.tasks.Get(taskID)
	must.True(t, ok)
	must.Wait(t, wait.InitialSuccess(
		wait.BoolFunc(func() bool { return len(h.ckpt.sem) == 0 }),
		wait.Timeout(time.Minute), wait.Gap(5*time.Millisecond),
	))
}

func (td *testDriver) waitExit(t *testing.T, taskID string) *drivers.ExitResult {
	t.Helper()
	ch, err := td.WaitTask(context.Background(), taskID)
	must.NoError(t, err)
	select {
	case res := <-ch:
		return res
	case <-time.After(120 * time.Second):
		t.Fatalf("task %s did not exit", taskID)
		return nil
	}
}

var hashRe = regexp.MustCompile(`final step=(\d+) .* params_sha256=([0-9a-f]{64})`)

func finalHash(t *testing.T, out string) string {
	t.Helper()
	m := hashRe.FindStringSubmatch(out)
	must.SliceLen(t, 3, m, must.Sprintf("no final line in %q", out))
	return m[2]
}

// referenceHash is the final parameter hash of an uninterrupted run of
// trainerArgs(steps, ...).
func referenceHash(t *testing.T, steps uint64) string {
	t.Helper()
	c := trainer.DefaultConfig()
	c.Samples, c.Steps, c.LogEvery = 512, steps, 0
	res, err := trainer.Run(context.Background(), c, trainer.Options{})
	must.NoError(t, err)
	return res.Hash
}

func trainerArgs(steps uint64, delay string) []string {
	return []string{"-samples", "512", "-steps", fmt.Sprint(steps), "-log-every", "50", "-step-delay", delay}
}
