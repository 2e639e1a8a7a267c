package store

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// chunkFiles lists the chunk digests present in the store.
func chunkFiles(t *testing.T, s *Store) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	dirs, err := os.ReadDir(s.chunksDir())
	must.NoError(t, err)
	for _, d := range dirs {
		ents, err := os.ReadDir(filepath.Join(s.chunksDir(), d.Name()))
		must.NoError(t, err)
		for _, e := range ents {
			out[e.Name()] = true
		}
	}
	return out
}

func referenced(ms ...[]*Manifest) map[string]bool {
	out := map[string]bool{}
	for _, l := range ms {
		for _, m := range l {
			for _, f := range m.Files {
				for _, c := range f.Chunks {
					out[c] = true
				}
			}
		}
	}
	return out
}

func TestRetentionAndGC(t *testing.T) {
	cases := []struct {
		name   string
		retain int
		commit int
	}{
		{"fewer than retain", 3, 2},
		{"retain one", 1, 4},
		{"retain three", 3, 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := openTestStore(t, Options{Retain: tc.retain})
			key, other := testKey("gc"), testKey("other")
			snaps := commitGenerations(t, s, key, tc.commit)
			// Another key sharing generation 1's data must keep its chunks.
			src := t.TempDir()
			writeTree(t, src, 100)
			_, _, err := s.Commit(ctx, other, src, "n", nil)
			must.NoError(t, err)

			must.NoError(t, s.GC(key))
			ms := mustList(t, s, key)
			must.Len(t, min(tc.retain, tc.commit), ms)
			must.Eq(t, uint64(tc.commit), ms[len(ms)-1].Generation)
			must.Eq(t, referenced(ms, mustList(t, s, other)), chunkFiles(t, s))

			for _, m := range ms {
				must.NoError(t, verifyGeneration(t, s, m))
			}
			dst := filepath.Join(t.TempDir(), "ckpt")
			_, err = s.Restore(ctx, key, dst)
			must.NoError(t, err)
			must.Eq(t, snaps[tc.commit], snapshot(t, dst))
			dst2 := filepath.Join(t.TempDir(), "ckpt")
			_, err = s.Restore(ctx, other, dst2)
			must.NoError(t, err)
			must.Eq(t, snapshot(t, src), snapshot(t, dst2))
		})
	}
}

// TestGCKeepsChunksOfCommitInFlight pauses a commit that found its chunks
// already present (and so wrote none) right before it publishes its manifest,
// runs GC after the only manifest referencing those chunks was pruned, and
// checks the chunks survive because GC waits for the commit.
func TestGCKeepsChunksOfCommitInFlight(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{Retain: 1})
	a, b := testKey("a"), testKey("b")
	src := t.TempDir()
	writeTree(t, src, 5)
	_, _, err := s.Commit(ctx, a, src, "n", nil)
	must.NoError(t, err)

	paused, resume := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	testHook = func(step string) {
		if step == StepChunksSynced && first.CompareAndSwap(false, true) {
			close(paused)
			<-resume
		}
	}
	t.Cleanup(func() { testHook = nil })
	done := make(chan error, 1)
	go func() {
		_, _, err := s.Commit(ctx, b, src, "n", nil)
		done <- err
	}()
	<-paused

	// Replace a's only generation with different data: its old chunks are
	// now referenced by no published manifest, only by b's commit in flight.
	other := t.TempDir()
	writeTree(t, other, 6)
	_, _, err = s.Commit(ctx, a, other, "n", nil)
	must.NoError(t, err)
	gcDone := make(chan error, 1)
	go func() { gcDone <- s.GC(a) }()
	select {
	case err := <-gcDone:
		t.Fatalf("GC finished while a commit was in flight: %v", err)
	default:
	}
	close(resume)
	must.NoError(t, <-done)
	must.NoError(t, <-gcDone)

	dst := filepath.Join(t.TempDir(), "ckpt")
	_, err = s.Restore(ctx, b, dst)
	must.NoError(t, err)
	must.Eq(t, snapshot(t, src), snapshot(t, dst))
}

// TestGCWaitsForCommitInOtherProcess pauses a commit in a helper process
// right before it publishes a manifest that references chunks no published
// manifest references any more, and checks that this process cannot take
// the GC lock until the helper is done, and that the helper's checkpoint
// survives the GC that follows.
func TestGCWaitsForCommitInOtherProcess(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{Retain: 1})
	a, b := testKey("a"), testKey("b")
	src := t.TempDir()
	writeTree(t, src, 21)
	_, _, err := s.Commit(ctx, a, src, "n", nil)
	must.NoError(t, err)

	cmd := helperCmd(t, "commit", s.root, src, b.Job, envPauseAt+"="+StepChunksSynced)
	stdin, err := cmd.StdinPipe()
	must.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	must.NoError(t, err)
	must.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	must.NoError(t, err)
	must.Eq(t, "paused\n", line)

	other := t.TempDir()
	writeTree(t, other, 22)
	_, _, err = s.Commit(ctx, a, other, "n", nil)
	must.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = s.sweep(short)
	must.ErrorIs(t, err, context.DeadlineExceeded)

	must.NoError(t, stdin.Close())
	must.NoError(t, cmd.Wait())
	must.NoError(t, s.GC(a))
	dst := filepath.Join(t.TempDir(), "ckpt")
	_, err = s.Restore(ctx, b, dst)
	must.NoError(t, err)
	must.Eq(t, snapshot(t, src), snapshot(t, dst))
}
