package storetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caravan-nomad/caravan/driver/store"
)

// heldPuts wraps a backend so that, while hold is set, a Put of a name
// matching match signals entered (once) and blocks until release closes.
type heldPuts struct {
	*Faulty
	hold    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func holdPuts(b store.Backend, match func(name string) bool) *heldPuts {
	h := &heldPuts{entered: make(chan struct{}, 1), release: make(chan struct{})}
	h.Faulty = &Faulty{Backend: b, BeforePut: func(ctx context.Context, name string) error {
		if h.hold.Load() && match(name) {
			select {
			case h.entered <- struct{}{}:
			default:
			}
			<-h.release
		}
		return nil
	}}
	return h
}

// isManifest matches a generation's manifest: a commit writing one is
// publishing.
func isManifest(name string) bool { return strings.Contains(name, "/gen-") }

// commitAsync commits data as k from node in a goroutine; the channel
// gets the commit's error.
func commitAsync(t *testing.T, s *store.Store, k store.Key, data []byte, node string) <-chan error {
	done := make(chan error, 1)
	go func() {
		src := t.TempDir()
		writeTree(t, src, data)
		_, _, err := s.Commit(context.Background(), k, src, node, nil)
		done <- err
	}()
	return done
}

// commitUntil commits content(i), for i from first on, as k until ctx
// ends, counting the commits in n.
func commitUntil(ctx context.Context, t *testing.T, s *store.Store, k store.Key, first int, content func(i int) []byte, n *atomic.Int64) {
	for i := first; ctx.Err() == nil; i++ {
		src := t.TempDir()
		writeTree(t, src, content(i))
		if _, _, err := s.Commit(ctx, k, src, "n1", nil); err != nil && ctx.Err() == nil {
			t.Errorf("commit: %v", err)
			return
		}
		n.Add(1)
	}
}

// restoreUntil restores k until ctx ends, counting the restores in n; a
// restore that fails, falls back, or whose tree check (when not nil)
// rejects fails the test.
func restoreUntil(ctx context.Context, t *testing.T, s *store.Store, k store.Key, check func(dst string) error, n *atomic.Int64) {
	for ctx.Err() == nil {
		dst := filepath.Join(t.TempDir(), "ckpt")
		_ = os.Mkdir(dst, 0o755)
		res, err := s.Restore(ctx, k, dst)
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("restore: %v", err)
			}
			return
		}
		if len(res.FellBack) > 0 {
			t.Errorf("restore fell back past %v: GC deleted a chunk in use", res.FellBack)
			return
		}
		if check != nil {
			if err := check(dst); err != nil {
				t.Error(err)
				return
			}
		}
		n.Add(1)
	}
}

// collectUntil runs gc until ctx ends, pausing pace between runs (none
// when zero), counting the runs in n; ErrBusy is no failure.
func collectUntil(ctx context.Context, t *testing.T, gc func(context.Context) error, pace time.Duration, n *atomic.Int64) {
	for ctx.Err() == nil {
		if err := gc(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrBusy) {
			t.Errorf("gc: %v", err)
			return
		}
		n.Add(1)
		if pace > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(pace):
			}
		}
	}
}

// churn is a commit loop, a restore loop and a GC loop on one key, run
// at once by run.
type churn struct {
	committer, restorer *store.Store
	key                 store.Key
	first               int                         // the first i passed to content
	content             func(i int) []byte          // what the ith commit writes
	check               func(dst string) error      // each restored tree's check; nil for none
	gc                  func(context.Context) error // one GC run
	pace                time.Duration               // the pause between GC runs; 0 for none
}

// churnOvertime bounds how long the loops go on after ctx's window while
// one of them has not completed a run yet.
const churnOvertime = time.Minute

// run runs the three loops until ctx ends and each loop has completed at
// least one run (on a loaded machine one restore can take longer than the
// window; churnOvertime at the most), logs how often each ran and returns
// the counts.
func (c churn) run(ctx context.Context, t *testing.T) (commits, restores, gcs int64) {
	loops, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	var nc, nr, ng atomic.Int64
	wg.Add(3)
	go func() {
		defer wg.Done()
		commitUntil(loops, t, c.committer, c.key, c.first, c.content, &nc)
	}()
	go func() {
		defer wg.Done()
		restoreUntil(loops, t, c.restorer, c.key, c.check, &nr)
	}()
	go func() {
		defer wg.Done()
		collectUntil(loops, t, c.gc, c.pace, &ng)
	}()
	go func() {
		defer stop()
		<-ctx.Done()
		over := time.NewTimer(churnOvertime)
		defer over.Stop()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for nc.Load() == 0 || nr.Load() == 0 || ng.Load() == 0 {
			select {
			case <-over.C:
				return
			case <-loops.Done():
				return
			case <-tick.C:
			}
		}
	}()
	wg.Wait()
	t.Logf("%d commits, %d restores, %d gc runs", nc.Load(), nr.Load(), ng.Load())
	return nc.Load(), nr.Load(), ng.Load()
}
