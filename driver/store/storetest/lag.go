package storetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/objectstore"
)

// graceOptions are Options with a grace period: GC deletes only chunks
// unreferenced and older than it, and commits touch the old chunks they
// reuse.
func graceOptions(grace time.Duration) store.Options {
	o := Options()
	o.GCGrace = grace
	return o
}

func openWith(t *testing.T, b store.Backend, o store.Options) *store.Store {
	t.Helper()
	s, err := objectstore.Open(b, o)
	must.NoError(t, err)
	return s
}

// orphanOldChunks commits each of datas under a key of its own and
// deletes the keys, then lets grace pass: their chunks are unreferenced and
// older than the grace period, as a deleted job's chunks are when a new
// job with the same data commits them again.
func orphanOldChunks(t *testing.T, s *store.Store, grace time.Duration, datas ...[]byte) {
	t.Helper()
	for i, d := range datas {
		k := key("orphan-" + string(rune('a'+i)))
		commit(t, s, k, d)
		_, err := s.Delete(k)
		must.NoError(t, err)
	}
	time.Sleep(grace + 200*time.Millisecond) // the chunks' age is what GC judges
}

// testGCWaitsForUnlistedLease holds a commit between finding its chunks
// present (unreferenced: its key was deleted) and publishing, on a backend
// whose listing never shows a lease: GC must still find the commit's lease
// (by key, in the lease index) and wait, leaving its chunks.
func testGCWaitsForUnlistedLease(t *testing.T, nb NewBackend) {
	b := nb(t)
	mem, ok := b.(*Mem)
	if !ok {
		t.Skip("needs a backend whose listing can be made to lag")
	}
	mem.HideFromList = func(name string) bool { return strings.HasPrefix(name, "leases/") }
	h := holdPuts(b, isManifest)
	s := open(t, h.Faulty)
	k := key("unlisted-lease")
	data := randomBytes(t, 4*ChunkSize)
	commit(t, s, k, data)
	_, err := s.Delete(k)
	must.NoError(t, err)
	h.hold.Store(true)
	done := commitAsync(t, s, k, data, "node1")
	<-h.entered
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	err = open(t, b).Sweep(ctx)
	cancel()
	must.ErrorIs(t, err, context.DeadlineExceeded, must.Sprint("GC did not wait for the unlisted commit lease"))
	must.Eq(t, 5, countChunks(t, b))
	close(h.release)
	must.NoError(t, <-done)
	res, dst := restore(t, s, k)
	must.SliceEmpty(t, res.FellBack)
	sameTree(t, dst, data)
}

// testGCKeepsUnlistedManifests commits, as a new key, data whose chunks
// are unreferenced and older than the grace period (a deleted key's), on a
// backend whose listing lags behind the newest writes by less than half
// the grace period, and sweeps at once: GC does not see the new manifest,
// yet must not delete the chunks it names (the commit touched them).
// Another deleted key's chunks, which nothing names, do go.
func testGCKeepsUnlistedManifests(t *testing.T, nb NewBackend) {
	b := nb(t)
	mem, ok := b.(*Mem)
	if !ok {
		t.Skip("needs a backend whose listing can be made to lag")
	}
	const grace = 2 * time.Second
	s := openWith(t, b, graceOptions(grace))
	reused, garbage := randomBytes(t, 4*ChunkSize), randomBytes(t, 3*ChunkSize)
	orphanOldChunks(t, s, grace, reused, garbage)
	mem.ListLag = grace / 3
	k := key("unlisted-manifest")
	commit(t, s, k, reused)
	must.NoError(t, openWith(t, b, graceOptions(grace)).Sweep(context.Background()))
	res, dst := restore(t, s, k)
	must.SliceEmpty(t, res.FellBack)
	sameTree(t, dst, reused)
	mem.ListLag = 0
	must.Eq(t, 5, countChunks(t, b)) // the garbage key's 3 went
}

// testGCWhileCommitsReuseOldChunks runs GC in a loop on one client while
// another commits (alternating two contents whose chunks are unreferenced
// and older than the grace period, so every commit reuses and touches old
// chunks) and a third restores, with a grace period as in production (on
// Mem, with a listing lagging too): no restore ever falls back or differs.
func testGCWhileCommitsReuseOldChunks(t *testing.T, nb NewBackend) {
	b := nb(t)
	const grace = 2 * time.Second
	opts := graceOptions(grace)
	committer, restorer, collector := openWith(t, b, opts), openWith(t, b, opts), openWith(t, b, opts)
	contents := [][]byte{randomBytes(t, 4*ChunkSize), randomBytes(t, 4*ChunkSize)}
	orphanOldChunks(t, committer, grace, contents...)
	if mem, ok := b.(*Mem); ok {
		mem.ListLag = grace / 4
	}
	k := key("reuse")
	commit(t, committer, k, contents[0])
	ctx, cancel := context.WithTimeout(context.Background(), 2*grace)
	defer cancel()
	commits, restores, gcs := churn{
		committer: committer, restorer: restorer, key: k,
		first:   1,
		content: func(i int) []byte { return contents[i%2] },
		check: func(dst string) error {
			got, err := os.ReadFile(filepath.Join(dst, "model.bin"))
			if err != nil || !bytes.Equal(got, contents[0]) && !bytes.Equal(got, contents[1]) {
				return fmt.Errorf("restored model.bin differs from both contents (err %v)", err)
			}
			return nil
		},
		gc: collector.Sweep,
		// Pace the sweeps (a driver sweeps on an interval): back to
		// back, GC's lease would leave commits no gap to start in.
		pace: Options().LeaseTTL / 10,
	}.run(ctx, t)
	must.Positive(t, commits)
	must.Positive(t, restores)
	must.Positive(t, gcs)
	res, _ := restore(t, restorer, k)
	must.SliceEmpty(t, res.FellBack)
}

// testCommitTouchesReusedOldChunks commits data whose chunks are
// unreferenced and older than half the grace period: the commit uploads
// nothing new where the backend can touch, and every chunk it reuses is
// now younger than that, so no GC can delete it before a listing shows
// the new manifest.
func testCommitTouchesReusedOldChunks(t *testing.T, nb NewBackend) {
	b := nb(t)
	const grace = 2 * time.Second
	s := openWith(t, b, graceOptions(grace))
	data := randomBytes(t, 3*ChunkSize)
	orphanOldChunks(t, s, grace, data)
	before := chunkTimes(t, b)
	must.MapNotEmpty(t, before)
	_, st := commit(t, s, key("touch"), data)
	if _, ok := b.(store.Toucher); ok {
		must.Eq(t, int64(0), st.NewBytes)
	}
	after := chunkTimes(t, b)
	must.MapLen(t, len(before), after)
	for name, was := range before {
		must.True(t, after[name].After(was), must.Sprintf("chunk %s not touched: %v, was %v", name, after[name], was))
	}
}

// chunkTimes returns every chunk's modification time, read by key.
func chunkTimes(t *testing.T, b store.Backend) map[string]time.Time {
	t.Helper()
	var names []string
	must.NoError(t, b.List(context.Background(), "chunks/", func(o store.ObjectInfo) error {
		names = append(names, o.Name)
		return nil
	}))
	out := map[string]time.Time{}
	for _, n := range names {
		fi, err := b.Stat(context.Background(), n)
		must.NoError(t, err)
		out[n] = fi.Modified
	}
	return out
}
