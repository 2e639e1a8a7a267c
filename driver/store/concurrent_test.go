package store

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/shoenig/test/must"
)

// TestConcurrentCommitsDifferentKeys commits two allocations' checkpoints in
// parallel, with GC running alongside, and checks both restore intact.
func TestConcurrentCommitsDifferentKeys(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{Retain: 2})
	keys := []Key{testKey("a"), testKey("b")}
	keys[1].Index = 1
	srcs := make([]string, len(keys))
	for i := range keys {
		srcs[i] = t.TempDir()
		// Same seed: the two keys share every chunk, the worst case for GC.
		writeTree(t, srcs[i], 9)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 5; n++ {
				if _, _, err := s.Commit(ctx, key, srcs[i], "n"+strconv.Itoa(i), nil); err != nil {
					errs <- err
				}
				if err := s.GC(key); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must.NoError(t, err)
	}
	for i, key := range keys {
		ms := mustList(t, s, key)
		must.Len(t, 2, ms)
		must.Eq(t, uint64(5), ms[1].Generation)
		for _, m := range ms {
			must.NoError(t, verifyGeneration(t, s, m))
		}
		dst := filepath.Join(t.TempDir(), "ckpt")
		_, err := s.Restore(ctx, key, dst)
		must.NoError(t, err)
		must.Eq(t, snapshot(t, srcs[i]), snapshot(t, dst))
	}
}

// TestConcurrentCommitsSameKeyProcesses runs commit loops of the same key in
// two helper processes and this one and checks that every generation number
// was taken exactly once and every generation verifies.
func TestConcurrentCommitsSameKeyProcesses(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{Retain: 100})
	key := testKey("same")
	src := t.TempDir()
	writeTree(t, src, 3)

	const loops = 4
	var cmds []*syncCmd
	for p := 0; p < 2; p++ {
		c := helperCmd(t, "commit-loop", s.root, src, key.Job, envLoops+"="+strconv.Itoa(loops))
		sc := &syncCmd{}
		c.Stdout, c.Stderr = sc, sc
		must.NoError(t, c.Start())
		sc.cmd = c
		cmds = append(cmds, sc)
	}
	for n := 0; n < loops; n++ {
		_, _, err := s.Commit(ctx, key, src, "parent", nil)
		must.NoError(t, err)
	}
	for _, c := range cmds {
		must.NoError(t, c.cmd.Wait(), must.Sprintf("helper output: %s", c.String()))
	}
	ms := mustList(t, s, key)
	must.Len(t, 3*loops, ms)
	var gens []uint64
	nodes := map[string]int{}
	for _, m := range ms {
		gens = append(gens, m.Generation)
		nodes[m.Node]++
		must.NoError(t, verifyGeneration(t, s, m))
	}
	for i := range gens {
		must.Eq(t, uint64(i+1), gens[i])
	}
	must.MapLen(t, 3, nodes)
	must.True(t, slices.IsSorted(gens))
}

// syncCmd collects a helper's output.
type syncCmd struct {
	mu  sync.Mutex
	buf []byte
	cmd interface{ Wait() error }
}

func (s *syncCmd) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	return len(p), nil
}

func (s *syncCmd) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.buf)
}
