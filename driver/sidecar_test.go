package driver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/driver/protocol"
	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/objectstore"
	"github.com/caravan-nomad/caravan/driver/store/storetest/filebackend"
)

func sidecarTask(interval, timeout string) *TaskConfig {
	tc := roleTask(RoleSidecar)
	tc.Checkpoint.Signal, tc.Checkpoint.Interval, tc.Checkpoint.Timeout = "SIGUSR1", interval, timeout
	return tc
}

// fakeMain stands in for a container main task: it polls the sidecar's
// request file in dir and answers each new request (up to answers, -1 for
// all) with state.bin and a marker, sequence n and step 10n.
func fakeMain(t *testing.T, dir string, answers int) *atomic.Int64 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var answered atomic.Int64
	go func() {
		seen := protocol.RequestSequence(dir)
		for ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond) // a trainer's step
			seq := protocol.RequestSequence(dir)
			if seq <= seen || (answers >= 0 && answered.Load() >= int64(answers)) {
				continue
			}
			seen = seq
			n := uint64(answered.Add(1))
			step := 10 * n
			_ = os.WriteFile(filepath.Join(dir, "state.bin"), []byte(strings.Repeat("w", int(n))), 0o644)
			_ = protocol.WriteMarker(dir, &protocol.Marker{Sequence: n, Step: &step})
		}
	}()
	return &answered
}

// startRestored runs a restore role task and returns its config and the
// allocation's checkpoint directory.
func startRestored(t *testing.T, td *testDriver, node string) (*drivers.TaskConfig, string) {
	t.Helper()
	restore := newTask(t, td, node, roleTask(RoleRestore))
	_, _, err := td.StartTask(restore)
	must.NoError(t, err)
	must.Eq(t, 0, td.waitExit(t, restore.ID).ExitCode)
	return restore, filepath.Join(restore.TaskDir().SharedAllocDir, "checkpoint")
}

// sidecarRun is a restored allocation whose fake main task answers
// checkpoint requests, with its checkpoint sidecar started.
type sidecarRun struct {
	storeDir      string
	td            *testDriver
	restore, side *drivers.TaskConfig
	dir           string // the allocation's checkpoint directory
	handle        *drivers.TaskHandle
}

// startSidecar restores on client1, starts fakeMain(answers) and a sidecar
// with the given checkpoint interval and timeout.
func startSidecar(t *testing.T, answers int, interval, timeout string) *sidecarRun {
	t.Helper()
	r := &sidecarRun{storeDir: t.TempDir()}
	r.td = newTestDriver(t, r.storeDir)
	r.restore, r.dir = startRestored(t, r.td, "client1")
	fakeMain(t, r.dir, answers)
	r.side = sameAllocTask(t, r.restore, "checkpoint", sidecarTask(interval, timeout))
	var err error
	r.handle, _, err = r.td.StartTask(r.side)
	must.NoError(t, err)
	return r
}

// saveFirst asks the sidecar for a checkpoint and waits for generation 1
// and for the sidecar to be idle again.
func (r *sidecarRun) saveFirst(t *testing.T) {
	t.Helper()
	must.NoError(t, r.td.SignalTask(r.side.ID, "SIGUSR1"))
	r.td.waitEvent(t, "Checkpoint saved (on demand): generation 1")
	r.td.waitIdle(t, r.side.ID)
}

func readLeaseOf(t *testing.T, storeDir, allocID string) (lease, bool) {
	t.Helper()
	l, err := leasesOf(openStore(t, storeDir), roleKey)
	must.NoError(t, err)
	ls, err := l.others(t.Context(), "")
	must.NoError(t, err)
	for _, x := range ls {
		if x.Holder == allocID {
			return x, true
		}
	}
	return lease{}, false
}

// leaseFile is where a directory store keeps allocID's writer lease on key
// (the layout of the driver's lease files before the store kept them).
func leaseFile(storeDir string, key store.Key, allocID string) string {
	sum := sha256.Sum256([]byte(key.String()))
	return filepath.Join(storeDir, ".writers", hex.EncodeToString(sum[:16]), allocID+".json")
}

var roleKey = store.Key{Namespace: "default", Job: "train", Group: "g", Task: "trainer", Incarnation: "1"}

// TestDriver_RoleSidecar: a poststart sidecar commits on demand (`nomad
// alloc signal` with its checkpoint signal, which writes the request file
// the main task polls) and periodically, holds the key's writer lease while
// it runs, hands it to the poststop commit task ("stopping") when stopped,
// and the commit task frees it.
func TestDriver_RoleSidecar(t *testing.T) {
	r := startSidecar(t, -1, "", "10s")
	storeDir, td, restore, dir, side := r.storeDir, r.td, r.restore, r.dir, r.side
	td.waitEvent(t, `Checkpoint sidecar for task "trainer" started: requests on demand only`)
	ls, ok := readLeaseOf(t, storeDir, restore.AllocID)
	must.True(t, ok)
	must.Eq(t, leaseRunning, ls.State)

	must.NoError(t, td.SignalTask(side.ID, "SIGUSR1"))
	ev := td.waitEvent(t, "Checkpoint saved (on demand): generation 1 at step 10")
	must.Eq(t, "1", ev.Annotations[annotationGeneration])
	must.ErrorContains(t, td.SignalTask(side.ID, "SIGHUP"), "checkpoint.signal")
	status, err := td.InspectTask(side.ID)
	must.NoError(t, err)
	must.Eq(t, drivers.TaskStateRunning, status.State)

	must.NoError(t, td.StopTask(side.ID, 5*time.Second, "SIGTERM"))
	must.Eq(t, 0, td.waitExit(t, side.ID).ExitCode)
	ls, ok = readLeaseOf(t, storeDir, restore.AllocID)
	must.True(t, ok)
	must.Eq(t, leaseStopping, ls.State)

	// The main task saved once more on its kill signal; the poststop task
	// commits it and frees the key.
	step := uint64(15)
	must.NoError(t, protocol.WriteMarker(dir, &protocol.Marker{Sequence: 2, Step: &step}))
	commit := sameAllocTask(t, restore, "commit", roleTask(RoleCommit))
	_, _, err = td.StartTask(commit)
	must.NoError(t, err)
	td.waitEvent(t, "Checkpoint saved (exit): generation 2 at step 15")
	_, ok = readLeaseOf(t, storeDir, restore.AllocID)
	must.False(t, ok, must.Sprint("the commit task left the lease behind"))
}

// TestDriver_RoleSidecarPeriodic: with checkpoint.interval the sidecar asks
// for checkpoints on its own.
func TestDriver_RoleSidecarPeriodic(t *testing.T) {
	r := startSidecar(t, -1, "200ms", "10s")
	td, side := r.td, r.side
	td.waitEvent(t, "Checkpoint saved (periodic): generation 1 at step 10")
	td.waitEvent(t, "Checkpoint saved (periodic): generation 2 at step 20")
	must.NoError(t, td.StopTask(side.ID, 5*time.Second, "SIGTERM"))
}

// TestDriver_RoleSidecarMainIgnoresRequests: a main task that stops
// answering the request file gets a failed checkpoint event naming the
// timeout, the generation before stays the newest and restorable, and the
// sidecar still stops within its kill timeout.
func TestDriver_RoleSidecarMainIgnoresRequests(t *testing.T) {
	r := startSidecar(t, 1, "", "300ms")
	td, side := r.td, r.side
	must.NoError(t, td.SignalTask(side.ID, "SIGUSR1"))
	td.waitEvent(t, "Checkpoint saved (on demand): generation 1 at step 10")
	td.waitIdle(t, side.ID)
	must.NoError(t, td.SignalTask(side.ID, "SIGUSR1"))
	ev := td.waitEvent(t, "Checkpoint failed (on demand): timed out waiting for caravan-checkpoint.json")
	must.StrContains(t, ev.Message, "generation 1 kept")

	// A request still pending at the stop is given up at once.
	must.NoError(t, td.SignalTask(side.ID, "SIGUSR1"))
	start := time.Now()
	must.NoError(t, td.StopTask(side.ID, 3*time.Second, "SIGTERM"))
	must.Less(t, 3*time.Second, time.Since(start))

	restore2 := newTask(t, td, "client2", roleTask(RoleRestore))
	_, _, err := td.StartTask(restore2)
	must.NoError(t, err)
	td.waitEvent(t, "Checkpoint restored: generation 1 (step 10) from client1")
}

// keyLockFile finds the store's lock file of roleKey.
func keyLockFile(t *testing.T, storeDir string) string {
	t.Helper()
	var found string
	_ = filepath.WalkDir(storeDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "lock" && strings.Contains(p, "trainer") {
			found = p
		}
		return nil
	})
	must.NotEq(t, "", found)
	return found
}

// TestDriver_RoleSidecarStopWaitsForCommitInFlight: the main task exits
// (Nomad stops the sidecar) while the sidecar's commit waits on the key's
// lock: the lease says "committing" meanwhile, the stop lets the commit
// finish, and the lease is then handed over as "stopping". Nothing is
// half-written: the generation is complete and restorable.
func TestDriver_RoleSidecarStopWaitsForCommitInFlight(t *testing.T) {
	r := startSidecar(t, -1, "", "10s")
	storeDir, td, restore, side := r.storeDir, r.td, r.restore, r.side
	r.saveFirst(t)

	// Another writer holds the key's lock: the next commit waits on it.
	f, err := os.OpenFile(keyLockFile(t, storeDir), os.O_RDWR, 0)
	must.NoError(t, err)
	defer f.Close()
	must.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	must.NoError(t, td.SignalTask(side.ID, "SIGUSR1"))
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		ls, ok := readLeaseOf(t, storeDir, restore.AllocID)
		return ok && ls.State == leaseCommitting
	}), wait.Timeout(10*time.Second), wait.Gap(10*time.Millisecond)))

	stopped := make(chan error, 1)
	go func() { stopped <- td.StopTask(side.ID, 30*time.Second, "SIGTERM") }()
	select {
	case err := <-stopped:
		t.Fatalf("the stop returned (%v) while the commit waited on the key lock", err)
	case <-time.After(300 * time.Millisecond):
	}
	must.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_UN))
	must.NoError(t, <-stopped)
	td.waitEvent(t, "Checkpoint saved (on demand): generation 2 at step 20")
	ls, ok := readLeaseOf(t, storeDir, restore.AllocID)
	must.True(t, ok)
	must.Eq(t, leaseStopping, ls.State)
	m, err := openStore(t, storeDir).Latest(roleKey)
	must.NoError(t, err)
	must.Eq(t, uint64(2), m.Generation)
}

// TestDriver_RoleRestoreWaitsForCommitLease: Nomad does not make a new
// allocation wait for the old one's poststop commit, and here Nomad's API
// no longer lists the old allocation as running: the restore still waits
// while the old allocation's writer lease says it is committing, then
// restores the generation that commit wrote, never the older one. On an
// object store too (the engine S3 runs, here on a directory backend):
// there the restore used to go ahead at once, with the event "Cannot
// check for a commit in flight".
func TestDriver_RoleRestoreWaitsForCommitLease(t *testing.T) {
	for _, kind := range []string{"directory", "object"} {
		t.Run(kind, func(t *testing.T) {
			storeDir := t.TempDir()
			td := newTestDriver(t, storeDir)
			st := openStore(t, storeDir)
			if kind == "object" {
				b, err := filebackend.New(storeDir)
				must.NoError(t, err)
				t.Cleanup(func() { _ = b.Close() })
				st, err = objectstore.Open(b, store.Options{ChunkSize: 4096})
				must.NoError(t, err)
				td.d.storeLock.Lock()
				td.d.store = st
				td.d.storeLock.Unlock()
			}
			old, dir := startRestored(t, td, "client1")
			step := uint64(30)
			must.NoError(t, os.WriteFile(filepath.Join(dir, "state.bin"), []byte("newest"), 0o644))
			must.NoError(t, protocol.WriteMarker(dir, &protocol.Marker{Sequence: 1, Step: &step}))
			// The old allocation's poststop commit has started (slow: a big
			// state).
			l, err := leasesOf(st, roleKey)
			must.NoError(t, err)
			must.NoError(t, l.put(old.AllocID, "client1", leaseCommitting))

			restore2 := newTask(t, td, "client2", roleTask(RoleRestore))
			done := make(chan error, 1)
			go func() { _, _, err := td.StartTask(restore2); done <- err }()
			td.waitEvent(t, "Waiting for allocation "+old.AllocID+" (committing) to finish writing checkpoint "+roleKey.String())
			select {
			case err := <-done:
				t.Fatalf("the restore went ahead (%v) while the old allocation was committing", err)
			default:
			}

			commit := sameAllocTask(t, old, "commit", roleTask(RoleCommit))
			_, _, err = td.StartTask(commit)
			must.NoError(t, err)
			must.NoError(t, <-done)
			td.waitEvent(t, "Checkpoint restored: generation 1 (step 30) from client1")
			b, err := os.ReadFile(filepath.Join(restore2.TaskDir().SharedAllocDir, "checkpoint", "state.bin"))
			must.NoError(t, err)
			must.Eq(t, "newest", string(b))
		})
	}
}

// TestAwaitLeases: which leases hold a restore back, the stale one ignored
// with an event, and the bound naming checkpoint.wait_timeout.
func TestAwaitLeases(t *testing.T) {
	cases := []struct {
		name, state, scope string
		age                time.Duration
		want               string // "" proceeds, else an error substring
	}{
		{"committing", leaseCommitting, ScopeAlloc, 0, "checkpoint.wait_timeout"},
		{"stopping", leaseStopping, ScopeAlloc, 0, "checkpoint.wait_timeout"},
		{"running predecessor", leaseRunning, ScopeAlloc, 0, "checkpoint.wait_timeout"},
		{"running group member", leaseRunning, ScopeGroup, 0, ""},
		{"committing group member", leaseCommitting, ScopeGroup, 0, "checkpoint.wait_timeout"},
		{"stale", leaseCommitting, ScopeAlloc, 2 * leaseTTL, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			td := newTestDriver(t, t.TempDir())
			storeDir := t.TempDir()
			l, err := leasesOf(openStore(t, storeDir), roleKey)
			must.NoError(t, err)
			must.NoError(t, l.put("other", "client9", c.state))
			must.NoError(t, l.put("self", "client1", leaseCommitting)) // its own lease never counts
			if c.age > 0 {
				// A lease file as a writer that died c.age ago left it.
				p := leaseFile(storeDir, roleKey, "other")
				var ls map[string]any
				b, err := os.ReadFile(p)
				must.NoError(t, err)
				must.NoError(t, json.Unmarshal(b, &ls))
				ls["renewed"] = time.Now().Add(-c.age).UTC()
				b, err = json.Marshal(ls)
				must.NoError(t, err)
				must.NoError(t, os.WriteFile(p, b, 0o644))
			}
			ev := newTaskEmitter(td.d.eventer, &drivers.TaskConfig{ID: "x", Name: "restore", AllocID: "self"})
			// Read events while awaitLeases runs: the eventer drops an
			// event nobody takes in time.
			stale := make(chan bool, 1)
			go func() {
				timeout := time.After(30 * time.Second)
				for {
					select {
					case e, ok := <-td.events:
						if !ok {
							stale <- false
							return
						}
						if strings.Contains(e.Message, "Allocation other did not finish its checkpoint commit") {
							stale <- true
							return
						}
					case <-timeout:
						stale <- false
						return
					}
				}
			}()
			err = awaitLeases(t.Context(), []leaseWatch{{l, c.scope}}, "self", 300*time.Millisecond, ev)
			if c.want == "" {
				must.NoError(t, err)
			} else {
				must.ErrorContains(t, err, c.want)
				must.ErrorContains(t, err, "other ("+c.state+")")
			}
			if c.age > 0 {
				must.True(t, <-stale, must.Sprint("no event about the stale lease"))
			}
		})
	}
}

// TestLeases_RefuseBadAllocID: an allocation ID never names a path.
func TestLeases_RefuseBadAllocID(t *testing.T) {
	storeDir := t.TempDir()
	l, err := leasesOf(openStore(t, storeDir), roleKey)
	must.NoError(t, err)
	for _, id := range []string{"", "../x", "a/b", ".hidden"} {
		must.Error(t, l.put(id, "n", leaseRunning), must.Sprint(id))
	}
	ls, err := l.others(t.Context(), "")
	must.NoError(t, err)
	must.SliceEmpty(t, ls)
	must.True(t, errors.Is(l.drop("never-held"), nil))
}

// TestDriver_RoleSidecarRecovered: after a plugin restart the sidecar's
// handle is recovered running, on the same key, and on-demand requests
// reach it as before; the generation numbering continues.
func TestDriver_RoleSidecarRecovered(t *testing.T) {
	r := startSidecar(t, -1, "", "10s")
	side := r.side
	r.saveFirst(t)

	r.td.kill()
	td2 := newTestDriver(t, r.storeDir)
	must.NoError(t, td2.RecoverTask(r.handle))
	status, err := td2.InspectTask(side.ID)
	must.NoError(t, err)
	must.Eq(t, drivers.TaskStateRunning, status.State)
	must.NoError(t, td2.SignalTask(side.ID, "SIGUSR1"))
	td2.waitEvent(t, "Checkpoint saved (on demand): generation 2 at step 20")
	must.NoError(t, td2.StopTask(side.ID, 5*time.Second, "SIGTERM"))
	must.Eq(t, 0, td2.waitExit(t, side.ID).ExitCode)
}
