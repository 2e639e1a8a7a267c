package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/objectstore"
)

// ChunkSize is the chunk size Run's stores use.
const ChunkSize = 4 << 10

// NewBackend returns a fresh, empty backend for one test.
type NewBackend func(t *testing.T) store.Backend

// Options are the store options Run uses: small chunks, a short lease, no
// grace period and no settle delay, so tests run fast.
func Options() store.Options {
	return store.Options{Retain: 2, ChunkSize: ChunkSize, LeaseTTL: 3 * time.Second, GCGrace: -1, Settle: -1, Workers: 8}
}

// Run runs the suite every object store backend must pass.
func Run(t *testing.T, nb NewBackend) {
	tests := map[string]func(*testing.T, NewBackend){
		"RoundTrip":                    testRoundTrip,
		"SecondCommitUploadsChanged":   testSecondCommitUploadsChanged,
		"ConditionalCreate":            testConditionalCreate,
		"CorruptChunkFallsBack":        testCorruptChunkFallsBack,
		"MissingChunkFallsBack":        testMissingChunkFallsBack,
		"FailedCommitKeepsOld":         testFailedCommitKeepsOld,
		"CommitBoundedByContext":       testCommitBoundedByContext,
		"ConcurrentCommitsOneKey":      testConcurrentCommitsOneKey,
		"ListingLagNeverLosesNewest":   testListingLag,
		"DeleteAndDeleteGeneration":    testDelete,
		"GCDeletesOnlyUnreferenced":    testGCDeletesOnlyUnreferenced,
		"GCWaitsForCommitLease":        testGCWaitsForCommit,
		"GCDuringCommitsAndRestores":   testGCDuringCommitsAndRestores,
		"ExpiredLeaseDoesNotBlockGC":   testExpiredLease,
		"SharedPrefixKeysApart":        testSharedPrefix,
		"DeleteBusyWhileCommitting":    testDeleteBusy,
		"KeyLockOfDeadHolder":          testKeyLockOfDeadHolder,
		"KeyLockTakeoverRace":          testKeyLockTakeoverRace,
		"SecondGCBusy":                 testSecondGCBusy,
		"GCWaitsForUnlistedLease":      testGCWaitsForUnlistedLease,
		"GCKeepsUnlistedManifests":     testGCKeepsUnlistedManifests,
		"GCWhileCommitsReuseOldChunks": testGCWhileCommitsReuseOldChunks,
		"CommitTouchesReusedOldChunks": testCommitTouchesReusedOldChunks,
		"LostKeyLockNotPublished":      testLostKeyLockNotPublished,
		"NewChunksNeedNoLookup":        testNewChunksNeedNoLookup,
		"WriterLeases":                 testWriterLeases,
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) { fn(t, nb) })
	}
}

func open(t *testing.T, b store.Backend) *store.Store {
	t.Helper()
	s, err := objectstore.Open(b, Options())
	must.NoError(t, err)
	return s
}

func key(task string) store.Key {
	return store.Key{Namespace: "default", Job: "train", Group: "g", Task: task, Index: 0, Incarnation: "7"}
}

// writeTree writes a small checkpoint tree: a file of n chunks filled from
// seed, a nested file, an empty file and a symlink.
func writeTree(t *testing.T, dir string, data []byte) {
	t.Helper()
	must.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(dir, "model.bin"), data, 0o644))
	must.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "opt.bin"), data[:len(data)/3], 0o600))
	must.NoError(t, os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644))
	_ = os.Remove(filepath.Join(dir, "link"))
	must.NoError(t, os.Symlink("sub/opt.bin", filepath.Join(dir, "link")))
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	_, err := rand.Read(b)
	must.NoError(t, err)
	return b
}

// sameTree fails unless dst holds what writeTree wrote from data.
func sameTree(t *testing.T, dst string, data []byte) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(dst, "model.bin"))
	must.NoError(t, err)
	must.True(t, bytes.Equal(got, data), must.Sprint("model.bin differs"))
	got, err = os.ReadFile(filepath.Join(dst, "link"))
	must.NoError(t, err)
	must.True(t, bytes.Equal(got, data[:len(data)/3]), must.Sprint("sub/opt.bin via link differs"))
	fi, err := os.Stat(filepath.Join(dst, "sub", "opt.bin"))
	must.NoError(t, err)
	must.Eq(t, os.FileMode(0o600), fi.Mode().Perm())
	fi, err = os.Stat(filepath.Join(dst, "empty"))
	must.NoError(t, err)
	must.Eq(t, int64(0), fi.Size())
}

func commit(t *testing.T, s *store.Store, k store.Key, data []byte) (*store.Manifest, store.CommitStats) {
	t.Helper()
	src := t.TempDir()
	writeTree(t, src, data)
	m, st, err := s.Commit(context.Background(), k, src, "node1", nil)
	must.NoError(t, err)
	return m, st
}

func restore(t *testing.T, s *store.Store, k store.Key) (*store.RestoreResult, string) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "ckpt")
	must.NoError(t, os.Mkdir(dst, 0o755))
	res, err := s.Restore(context.Background(), k, dst)
	must.NoError(t, err)
	return res, dst
}

func testRoundTrip(t *testing.T, nb NewBackend) {
	s := open(t, nb(t))
	k := key("rt")
	_, err := s.Latest(k)
	must.ErrorIs(t, err, store.ErrNoCheckpoint)
	data := randomBytes(t, 10*ChunkSize+123)
	m, st := commit(t, s, k, data)
	must.Eq(t, uint64(1), m.Generation)
	must.Positive(t, st.NewBytes)
	res, dst := restore(t, s, k)
	must.Eq(t, uint64(1), res.Manifest.Generation)
	sameTree(t, dst, data)
	latest, err := s.Latest(k)
	must.NoError(t, err)
	must.Eq(t, m.Generation, latest.Generation)
	keys, err := s.Keys()
	must.NoError(t, err)
	must.Eq(t, []store.Key{k}, keys)
}

func testSecondCommitUploadsChanged(t *testing.T, nb NewBackend) {
	s := open(t, nb(t))
	k := key("dedup")
	const chunks = 100
	data := randomBytes(t, chunks*ChunkSize)
	_, first := commit(t, s, k, data)
	must.Positive(t, first.NewBytes)
	// Change 10% of model.bin's chunks (sub/opt.bin is its first third and
	// shares chunks with it, so change chunks beyond it).
	for c := 50; c < 60; c++ {
		copy(data[c*ChunkSize:], randomBytes(t, ChunkSize))
	}
	_, second := commit(t, s, k, data)
	must.Eq(t, int64(10*ChunkSize), second.NewBytes, must.Sprintf("second commit uploaded %d bytes", second.NewBytes))
	_, dst := restore(t, s, k)
	sameTree(t, dst, data)
}

func testConditionalCreate(t *testing.T, nb NewBackend) {
	b := nb(t)
	ctx := context.Background()
	must.NoError(t, b.Put(ctx, "probe/x", []byte("one"), true))
	err := b.Put(ctx, "probe/x", []byte("two"), true)
	must.ErrorIs(t, err, store.ErrObjectExists)
	rc, _, err := b.Get(ctx, "probe/x")
	must.NoError(t, err)
	defer rc.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(rc)
	must.NoError(t, err)
	must.Eq(t, "one", buf.String())
	_, err = b.Stat(ctx, "probe/missing")
	must.ErrorIs(t, err, store.ErrObjectNotFound)
	must.NoError(t, b.Delete(ctx, "probe/x"))
	must.NoError(t, b.Delete(ctx, "probe/x"))
}

// chunkOnlyIn returns a chunk digest of m's model.bin that old does not
// reference.
func chunkOnlyIn(t *testing.T, m, old *store.Manifest) string {
	t.Helper()
	refs := map[string]bool{}
	for _, f := range old.Files {
		for _, c := range f.Chunks {
			refs[c] = true
		}
	}
	for _, f := range m.Files {
		for _, c := range f.Chunks {
			if !refs[c] {
				return c
			}
		}
	}
	t.Fatal("no chunk only in the new generation")
	return ""
}

func chunkName(d string) string { return "chunks/" + d[:2] + "/" + d }

func testCorruptChunkFallsBack(t *testing.T, nb NewBackend) {
	b := nb(t)
	s := open(t, b)
	k := key("corrupt")
	old := randomBytes(t, 8*ChunkSize)
	m1, _ := commit(t, s, k, old)
	m2, _ := commit(t, s, k, randomBytes(t, 8*ChunkSize))
	d := chunkOnlyIn(t, m2, m1)
	must.NoError(t, b.Put(context.Background(), chunkName(d), randomBytes(t, ChunkSize), false))
	res, dst := restore(t, s, k)
	must.Eq(t, uint64(1), res.Manifest.Generation)
	must.Eq(t, []uint64{2}, res.FellBack)
	sameTree(t, dst, old)
	// The bad copy is gone, so the next commit of those bytes uploads it.
	_, err := b.Stat(context.Background(), chunkName(d))
	must.ErrorIs(t, err, store.ErrObjectNotFound)
}

func testMissingChunkFallsBack(t *testing.T, nb NewBackend) {
	b := nb(t)
	s := open(t, b)
	k := key("missing")
	old := randomBytes(t, 8*ChunkSize)
	m1, _ := commit(t, s, k, old)
	m2, _ := commit(t, s, k, randomBytes(t, 8*ChunkSize))
	must.NoError(t, b.Delete(context.Background(), chunkName(chunkOnlyIn(t, m2, m1))))
	res, dst := restore(t, s, k)
	must.Eq(t, uint64(1), res.Manifest.Generation)
	must.Eq(t, []uint64{2}, res.FellBack)
	sameTree(t, dst, old)
}

var errInjected = errors.New("injected fault")

func testFailedCommitKeepsOld(t *testing.T, nb NewBackend) {
	for _, at := range []string{"chunk", "manifest"} {
		t.Run(at, func(t *testing.T) {
			var fail atomic.Bool
			var puts atomic.Int64
			f := &Faulty{Backend: nb(t), BeforePut: func(_ context.Context, name string) error {
				if !fail.Load() {
					return nil
				}
				switch {
				case at == "chunk" && strings.HasPrefix(name, "chunks/") && puts.Add(1) == 3:
					return errInjected
				case at == "manifest" && strings.Contains(name, "/gen-"):
					return errInjected
				}
				return nil
			}}
			s := open(t, f)
			k := key("fail-" + at)
			old := randomBytes(t, 8*ChunkSize)
			commit(t, s, k, old)
			fail.Store(true)
			src := t.TempDir()
			writeTree(t, src, randomBytes(t, 8*ChunkSize))
			_, _, err := s.Commit(context.Background(), k, src, "node1", nil)
			must.ErrorIs(t, err, errInjected)
			fail.Store(false)
			ms, err := s.List(k)
			must.NoError(t, err)
			must.SliceLen(t, 1, ms)
			res, dst := restore(t, s, k)
			must.Eq(t, uint64(1), res.Manifest.Generation)
			sameTree(t, dst, old)
			// The next commit proceeds and takes generation 2.
			m, _ := commit(t, s, k, randomBytes(t, 8*ChunkSize))
			must.Eq(t, uint64(2), m.Generation)
		})
	}
}

func testCommitBoundedByContext(t *testing.T, nb NewBackend) {
	stall := make(chan struct{})
	defer close(stall)
	var stalling atomic.Bool
	f := &Faulty{Backend: nb(t), BeforePut: func(ctx context.Context, name string) error {
		if stalling.Load() && strings.HasPrefix(name, "chunks/") {
			select {
			case <-stall:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}}
	s := open(t, f)
	k := key("bounded")
	old := randomBytes(t, 8*ChunkSize)
	commit(t, s, k, old)
	stalling.Store(true)
	src := t.TempDir()
	writeTree(t, src, randomBytes(t, 8*ChunkSize))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, _, err := s.Commit(ctx, k, src, "node1", nil)
	must.ErrorIs(t, err, context.DeadlineExceeded)
	stalling.Store(false)
	res, dst := restore(t, s, k)
	must.Eq(t, uint64(1), res.Manifest.Generation)
	sameTree(t, dst, old)
}

func testConcurrentCommitsOneKey(t *testing.T, nb NewBackend) {
	b := nb(t)
	k := key("race")
	const writers, each = 3, 3
	var wg sync.WaitGroup
	gens := make(chan uint64, writers*each)
	for w := range writers {
		s := open(t, b) // one store per writer, as on separate hosts
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				src := t.TempDir()
				writeTree(t, src, []byte(strings.Repeat(fmt.Sprintf("w%d-%d ", w, i), 1000)))
				m, _, err := s.Commit(context.Background(), k, src, "node", nil)
				if err != nil {
					t.Errorf("commit: %v", err)
					return
				}
				gens <- m.Generation
			}
		}()
	}
	wg.Wait()
	close(gens)
	seen := map[uint64]bool{}
	for g := range gens {
		must.False(t, seen[g], must.Sprintf("generation %d published twice", g))
		seen[g] = true
	}
	must.MapLen(t, writers*each, seen)
	m, err := open(t, b).Latest(k)
	must.NoError(t, err)
	must.Eq(t, uint64(writers*each), m.Generation)
}

func testListingLag(t *testing.T, nb NewBackend) {
	b := nb(t)
	mem, ok := b.(*Mem)
	if !ok {
		t.Skip("needs a backend whose listing can be made to lag")
	}
	mem.HideFromList = func(name string) bool { return strings.Contains(name, "/gen-") }
	s := open(t, b)
	k := key("lag")
	for want := uint64(1); want <= 3; want++ {
		data := randomBytes(t, 4*ChunkSize)
		m, _ := commit(t, s, k, data)
		must.Eq(t, want, m.Generation)
		latest, err := s.Latest(k)
		must.NoError(t, err)
		must.Eq(t, want, latest.Generation)
		res, dst := restore(t, s, k)
		must.Eq(t, want, res.Manifest.Generation)
		sameTree(t, dst, data)
	}
	// Even with the pointer gone, probing finds the generations.
	must.NoError(t, b.Delete(context.Background(), "keys/default/train@7/g/lag/0/latest"))
	latest, err := s.Latest(k)
	must.NoError(t, err)
	must.Eq(t, uint64(3), latest.Generation)
}

func testDelete(t *testing.T, nb NewBackend) {
	s := open(t, nb(t))
	k := key("del")
	commit(t, s, k, randomBytes(t, 2*ChunkSize))
	commit(t, s, k, randomBytes(t, 2*ChunkSize))
	must.NoError(t, s.DeleteGeneration(k, 2))
	m, err := s.Latest(k)
	must.NoError(t, err)
	must.Eq(t, uint64(1), m.Generation)
	err = s.DeleteGeneration(k, 5)
	must.ErrorIs(t, err, store.ErrNoCheckpoint)
	n, err := s.Delete(k)
	must.NoError(t, err)
	must.Eq(t, 1, n)
	_, err = s.Latest(k)
	must.ErrorIs(t, err, store.ErrNoCheckpoint)
	_, err = s.Delete(k)
	must.ErrorIs(t, err, store.ErrNoCheckpoint)
	keys, err := s.Keys()
	must.NoError(t, err)
	must.SliceEmpty(t, keys)
}

// countChunks returns how many chunk objects b holds.
func countChunks(t *testing.T, b store.Backend) int {
	n := 0
	must.NoError(t, b.List(context.Background(), "chunks/", func(store.ObjectInfo) error { n++; return nil }))
	return n
}

func testGCDeletesOnlyUnreferenced(t *testing.T, nb NewBackend) {
	b := nb(t)
	s := open(t, b) // Retain 2
	k := key("gc")
	var last []byte
	for range 4 {
		last = randomBytes(t, 4*ChunkSize)
		commit(t, s, k, last)
	}
	must.NoError(t, s.GC(k))
	// Two generations of 5 distinct chunks each (model.bin's 4, and the
	// short last chunk of opt.bin, whose first chunk is model.bin's).
	must.Eq(t, 10, countChunks(t, b))
	res, dst := restore(t, s, k)
	must.Eq(t, uint64(4), res.Manifest.Generation)
	sameTree(t, dst, last)
	ms, err := s.List(k)
	must.NoError(t, err)
	must.SliceLen(t, 2, ms)
	// A deleted key's chunks go with the next sweep.
	_, err = s.Delete(k)
	must.NoError(t, err)
	must.NoError(t, s.Sweep(context.Background()))
	must.Eq(t, 0, countChunks(t, b))
}

func testGCWaitsForCommit(t *testing.T, nb NewBackend) {
	h := holdPuts(nb(t), isManifest)
	f := h.Faulty
	s := open(t, f)
	gcStore := open(t, f.Backend)
	k := key("gcwait")
	// An unreferenced chunk a commit is about to reference again: gen 1's
	// data, deleted, then committed again while GC runs.
	data := randomBytes(t, 4*ChunkSize)
	commit(t, s, k, data)
	_, err := s.Delete(k)
	must.NoError(t, err)
	h.hold.Store(true)
	done := commitAsync(t, s, k, data, "node1")
	<-h.entered // the commit found its chunks present and is publishing
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	err = gcStore.Sweep(ctx)
	cancel()
	must.ErrorIs(t, err, context.DeadlineExceeded) // GC waited for the commit
	must.Eq(t, 5, countChunks(t, f.Backend))
	// Without a deadline, GC gives up after a lease's life: commits and
	// restores queued behind it wait no longer than that.
	err = gcStore.Sweep(context.Background())
	must.ErrorIs(t, err, store.ErrBusy)
	must.Eq(t, 5, countChunks(t, f.Backend))
	close(h.release)
	must.NoError(t, <-done)
	must.NoError(t, gcStore.Sweep(context.Background()))
	_, dst := restore(t, s, k)
	sameTree(t, dst, data)
}

func testGCDuringCommitsAndRestores(t *testing.T, nb NewBackend) {
	b := nb(t)
	committer, restorer, collector := open(t, b), open(t, b), open(t, b)
	k := key("busy")
	first := randomBytes(t, 4*ChunkSize)
	commit(t, committer, k, first)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	commits, _, gcs := churn{
		committer: committer, restorer: restorer, key: k,
		// Alternate between two contents, so commits keep re-referencing
		// chunks that GC may just have found unreferenced.
		content: func(i int) []byte {
			return bytes.Repeat([]byte{byte(i % 2), byte(i % 3)}, 2*ChunkSize)
		},
		gc: func(context.Context) error { return collector.GC(k) },
	}.run(ctx, t)
	must.Positive(t, commits)
	must.Positive(t, gcs)
	// Every retained generation verifies.
	res, _ := restore(t, restorer, k)
	must.SliceEmpty(t, res.FellBack)
}

func testExpiredLease(t *testing.T, nb NewBackend) {
	b := nb(t)
	s := open(t, b)
	ctx := context.Background()
	// A commit that crashed holding its lease.
	must.NoError(t, b.Put(ctx, "leases/commit-crashed", []byte(`{"op":"commit"}`), false))
	start := time.Now()
	must.NoError(t, s.Sweep(ctx))
	must.True(t, time.Since(start) >= Options().LeaseTTL/2, must.Sprint("GC did not wait for the live lease"))
	_, err := b.Stat(ctx, "leases/commit-crashed")
	must.ErrorIs(t, err, store.ErrObjectNotFound)
}

// testSharedPrefix has two clusters share one prefix, each running a job
// of the same name (different incarnations, as two clusters' jobs have
// different create indexes): each restores its own, and deleting one
// leaves the other.
func testSharedPrefix(t *testing.T, nb NewBackend) {
	b := nb(t)
	a, c := open(t, b), open(t, b)
	ka, kc := key("same"), key("same")
	ka.Incarnation, kc.Incarnation = "1042", "77"
	da, dc := randomBytes(t, 3*ChunkSize), randomBytes(t, 3*ChunkSize)
	commit(t, a, ka, da)
	commit(t, c, kc, dc)
	_, dst := restore(t, a, ka)
	sameTree(t, dst, da)
	_, dst = restore(t, c, kc)
	sameTree(t, dst, dc)
	_, err := a.Delete(ka)
	must.NoError(t, err)
	must.NoError(t, a.Sweep(context.Background()))
	_, dst = restore(t, c, kc)
	sameTree(t, dst, dc)
}

// testDeleteBusy deletes a key while a commit of it is publishing: ErrBusy,
// nothing deleted; afterwards both generations are there.
func testDeleteBusy(t *testing.T, nb NewBackend) {
	h := holdPuts(nb(t), isManifest)
	s := open(t, h.Faulty)
	k := key("busy-delete")
	commit(t, s, k, randomBytes(t, 2*ChunkSize))
	h.hold.Store(true)
	done := commitAsync(t, s, k, randomBytes(t, 2*ChunkSize), "node1")
	<-h.entered
	other := open(t, h.Backend)
	_, err := other.Delete(k)
	must.ErrorIs(t, err, store.ErrBusy)
	err = other.DeleteGeneration(k, 1)
	must.ErrorIs(t, err, store.ErrBusy)
	close(h.release)
	must.NoError(t, <-done)
	ms, err := other.List(k)
	must.NoError(t, err)
	must.SliceLen(t, 2, ms)
}

// testKeyLockOfDeadHolder leaves a key lock as a plugin killed mid-commit
// does: held by a live process it makes the next commit wait; held by a
// process of this host that is gone, the next commit takes it over at once
// (not after LeaseTTL).
func testKeyLockOfDeadHolder(t *testing.T, nb NewBackend) {
	b := nb(t)
	s := open(t, b)
	k := key("deadlock")
	commit(t, s, k, randomBytes(t, 2*ChunkSize))
	host, _ := os.Hostname()
	lock := "keys/default/train@7/g/deadlock/0/lock"
	put := func(pid int) {
		body := fmt.Sprintf(`{"op":"keylock","key":%q,"host":%q,"pid":%d}`, k.String(), host, pid)
		must.NoError(t, b.Put(context.Background(), lock, []byte(body), false))
	}
	src := t.TempDir()
	writeTree(t, src, randomBytes(t, 2*ChunkSize))

	put(os.Getppid()) // alive: the commit waits
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, _, err := s.Commit(ctx, k, src, "node1", nil)
	cancel()
	must.ErrorIs(t, err, context.DeadlineExceeded)

	cmd := exec.Command("true")
	must.NoError(t, cmd.Run())
	put(cmd.Process.Pid) // gone
	ctx, cancel = context.WithTimeout(context.Background(), Options().LeaseTTL-500*time.Millisecond)
	defer cancel()
	m, _, err := s.Commit(ctx, k, src, "node1", nil)
	must.NoError(t, err)
	must.Eq(t, uint64(2), m.Generation)
}
