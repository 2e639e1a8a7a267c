package storetest

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/driver/store"
)

// testKeyLockTakeoverRace leaves, round after round, a key lock whose
// holder is dead (as a plugin killed mid-commit does) and starts three
// commits of that key at once, from three clients: all find the lock stale
// and take it over. Exactly one may hold it: the manifests are written
// while an overlap detector looks for two commits publishing at once.
// Needs a Swapper: without one, take-over is a delete and a create, and two
// clients taking over at the same instant may both win (README.md, "What
// the store relies on"); the test file backend has none.
func testKeyLockTakeoverRace(t *testing.T, nb NewBackend) {
	b := nb(t)
	if _, ok := b.(store.Swapper); !ok {
		t.Skip("needs a backend with compare-and-swap")
	}
	var inside, most atomic.Int64
	f := &Faulty{Backend: b, BeforePut: func(ctx context.Context, name string) error {
		if strings.Contains(name, "/gen-") {
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(50 * time.Millisecond) // a window for the other holder to show
			inside.Add(-1)
		}
		return nil
	}}
	clients := []*store.Store{open(t, f), open(t, f), open(t, f)}
	k := key("takeover")
	lock := "keys/default/train@7/g/takeover/0/lock"
	host, _ := os.Hostname()
	rounds := 8
	for round := range rounds {
		cmd := exec.Command("true")
		must.NoError(t, cmd.Run())
		body := fmt.Sprintf(`{"op":"keylock","key":%q,"host":%q,"pid":%d,"nonce":"%d"}`, k.String(), host, cmd.Process.Pid, round)
		must.NoError(t, f.Backend.Put(context.Background(), lock, []byte(body), false))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, s := range clients {
			src := t.TempDir()
			writeTree(t, src, randomBytes(t, ChunkSize))
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 4*Options().LeaseTTL)
				defer cancel()
				<-start
				if _, _, err := s.Commit(ctx, k, src, "n", nil); err != nil {
					t.Errorf("round %d: commit: %v", round, err)
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	must.Eq(t, int64(1), most.Load(), must.Sprint("two clients held the key lock at once"))
	m, err := clients[0].Latest(k)
	must.NoError(t, err)
	must.Eq(t, uint64(len(clients)*rounds), m.Generation)
}

// testSecondGCBusy runs a sweep on one client, held waiting for a commit
// in flight, and a second sweep on another client: the second is ErrBusy
// at once instead of sweeping beside the first (whose lease the second
// would otherwise share, and whose release would let commits in while the
// second still deletes).
func testSecondGCBusy(t *testing.T, nb NewBackend) {
	h := holdPuts(nb(t), isManifest)
	f := h.Faulty
	s := open(t, f)
	k := key("twogc")
	h.hold.Store(true)
	done := commitAsync(t, s, k, randomBytes(t, 2*ChunkSize), "n")
	<-h.entered
	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), Options().LeaseTTL/2)
		defer cancel()
		first <- open(t, f.Backend).Sweep(ctx) // waits for the commit
	}()
	// Once the first holds GC's lease, the second is refused at once.
	must.Wait(t, wait.InitialSuccess(wait.ErrorFunc(func() error {
		_, err := f.Backend.Stat(context.Background(), "leases/gc")
		return err
	}), wait.Timeout(Options().LeaseTTL/2), wait.Gap(20*time.Millisecond)))
	second := open(t, f.Backend)
	ctx, cancel := context.WithTimeout(context.Background(), Options().LeaseTTL/4)
	err := second.Sweep(ctx)
	cancel()
	must.ErrorIs(t, err, store.ErrBusy)
	must.StrContains(t, err.Error(), "gc is sweeping")
	must.ErrorIs(t, <-first, context.DeadlineExceeded)
	close(h.release)
	must.NoError(t, <-done)
	must.NoError(t, second.Sweep(context.Background()))
}

// testLostKeyLockNotPublished holds a commit while it uploads and, as a
// client taking over the lock of a holder that paused past LeaseTTL does,
// replaces the key's lock: the commit must not publish (ErrBusy), and must
// leave the new holder's lock in place. Needs a Swapper: without one the
// store cannot tell its lock was taken over.
func testLostKeyLockNotPublished(t *testing.T, nb NewBackend) {
	b := nb(t)
	if _, ok := b.(store.Swapper); !ok {
		t.Skip("needs a backend with compare-and-swap")
	}
	h := holdPuts(b, func(name string) bool { return strings.HasPrefix(name, "chunks/") })
	s := open(t, h.Faulty)
	k := key("lostlock")
	commit(t, s, k, randomBytes(t, 2*ChunkSize))
	h.hold.Store(true)
	done := commitAsync(t, s, k, randomBytes(t, 2*ChunkSize), "node1")
	<-h.entered
	lock := "keys/default/train@7/g/lostlock/0/lock"
	theirs := []byte(`{"op":"keylock","host":"other-host","pid":1,"nonce":"taken-over"}`)
	must.NoError(t, b.Put(context.Background(), lock, theirs, false))
	h.hold.Store(false)
	close(h.release)
	err := <-done
	must.ErrorIs(t, err, store.ErrBusy)
	m, err := open(t, b).Latest(k)
	must.NoError(t, err)
	must.Eq(t, uint64(1), m.Generation)
	rc, _, err := b.Get(context.Background(), lock)
	must.NoError(t, err)
	got, err := io.ReadAll(rc)
	_ = rc.Close()
	must.NoError(t, err)
	must.Eq(t, string(theirs), string(got), must.Sprint("the commit deleted or overwrote the new holder's lock"))
}
