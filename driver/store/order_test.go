package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func meta(step, seq int) map[string]string {
	m := map[string]string{}
	if step >= 0 {
		m[MetaStep] = strconv.Itoa(step)
	}
	if seq >= 0 {
		m[MetaSequence] = strconv.Itoa(seq)
	}
	return m
}

// TestCommitRefusesStale commits a first generation, then a second one, and
// checks which second commits are refused as stale (-1: field absent).
func TestCommitRefusesStale(t *testing.T) {
	cases := []struct {
		name        string
		first, next map[string]string
		stale       bool
	}{
		{"older step", meta(100, 5), meta(90, 9), true},
		{"newer step, lower sequence", meta(100, 5), meta(110, 1), false},
		{"same step, lower sequence", meta(100, 5), meta(100, 4), true},
		{"same step, same sequence", meta(100, 5), meta(100, 5), false},
		{"same step, higher sequence", meta(100, 5), meta(100, 6), false},
		{"no steps, lower sequence", meta(-1, 5), meta(-1, 4), true},
		{"no steps, higher sequence", meta(-1, 5), meta(-1, 6), false},
		{"step on one side only: sequences decide", meta(100, 5), meta(-1, 4), true},
		{"new commit unordered", meta(100, 5), nil, false},
		{"newest unordered", nil, meta(1, 1), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := openTestStore(t, Options{})
			key := testKey("stale")
			src := t.TempDir()
			writeTree(t, src, 1)
			_, _, err := s.Commit(ctx, key, src, "n1", tc.first)
			must.NoError(t, err)
			src2 := t.TempDir()
			writeTree(t, src2, 2)
			_, _, err = s.Commit(ctx, key, src2, "n2", tc.next)
			ms := mustList(t, s, key)
			if tc.stale {
				must.ErrorIs(t, err, ErrStale)
				must.StrContains(t, err.Error(), "older than generation 1")
				must.Len(t, 1, ms)
				must.Eq(t, "n1", ms[0].Node)
				return
			}
			must.NoError(t, err)
			must.Len(t, 2, ms)
		})
	}
}

// TestCommitStaleSkipsCorruptNewest orders against the newest generation
// whose manifest still reads.
func TestCommitStaleSkipsCorruptNewest(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{Retain: 5})
	key := testKey("stale-corrupt")
	src := t.TempDir()
	writeTree(t, src, 1)
	for _, m := range []map[string]string{meta(10, 1), meta(50, 2)} {
		_, _, err := s.Commit(ctx, key, src, "n", m)
		must.NoError(t, err)
	}
	garbleManifest(t, s, key, 2)
	_, _, err := s.Commit(ctx, key, src, "n", meta(5, 3))
	must.ErrorIs(t, err, ErrStale)
	must.StrContains(t, err.Error(), "generation 1")
	_, _, err = s.Commit(ctx, key, src, "n", meta(20, 3))
	must.NoError(t, err)
}

// TestConcurrentCommittersNeverGoBack runs committers of one key in
// parallel, each with its own steps, and checks that the published
// generations never go back in step and that the newest holds the highest
// step committed; every refusal is ErrStale.
func TestConcurrentCommittersNeverGoBack(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{Retain: 1000})
	key := testKey("racing")
	key.Shared = true
	const committers, rounds = 4, 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		refused int
		maxOK   int
	)
	for c := 0; c < committers; c++ {
		src := t.TempDir()
		writeTree(t, src, uint64(c))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				// Interleaved steps: committer c's round r is at step
				// r*committers + c, so every committer is sometimes late.
				step := r*committers + (c*3)%committers
				_, _, err := s.Commit(ctx, key, src, fmt.Sprint("c", c), meta(step, r+1))
				mu.Lock()
				switch {
				case err == nil:
					maxOK = max(maxOK, step)
				case errIsStale(err):
					refused++
				default:
					t.Errorf("committer %d: %v", c, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	ms := mustList(t, s, key)
	must.Eq(t, committers*rounds, len(ms)+refused)
	prev := Position{}
	for _, m := range ms {
		p := PositionOf(m.Meta)
		must.False(t, p.OlderThan(prev), must.Sprintf("generation %d (%s) went back from %s", m.Generation, p, prev))
		prev = p
	}
	must.Eq(t, strconv.Itoa(maxOK), ms[len(ms)-1].Meta[MetaStep])
}

func errIsStale(err error) bool { return errors.Is(err, ErrStale) }

// garbleManifest makes generation gen's manifest unparsable.
func garbleManifest(t *testing.T, s *Store, key Key, gen uint64) {
	t.Helper()
	dir, err := key.dir(s.root)
	must.NoError(t, err)
	must.NoError(t, os.WriteFile(filepath.Join(dir, ManifestName(gen)), []byte("{not json"), 0o600))
}

// pauseFirstCommit makes the first commit that reaches StepChunksSynced
// (holding its key lock) wait until resume is closed.
func pauseFirstCommit(t *testing.T) (paused, resume chan struct{}) {
	t.Helper()
	paused, resume = make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	testHook = func(step string) {
		if step == StepChunksSynced && first.CompareAndSwap(false, true) {
			close(paused)
			<-resume
		}
	}
	t.Cleanup(func() { testHook = nil })
	return paused, resume
}

// TestTwoConcurrentCommitters starts a commit and, while it holds the key
// lock, a second one of the same key: the one that gets the lock second is
// refused when it is older, whatever it saw before waiting.
func TestTwoConcurrentCommitters(t *testing.T) {
	cases := []struct {
		name              string
		firstStep, second int
		wantStale         bool
		wantNewestStep    string
	}{
		{"late commit of an older step is refused", 100, 90, true, "100"},
		{"late commit of a newer step is published", 90, 100, false, "100"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := openTestStore(t, Options{})
			key := Key{Namespace: "default", Job: "dp", Group: "worker", Task: "t", Shared: true}
			srcA, srcB := t.TempDir(), t.TempDir()
			writeTree(t, srcA, 1)
			writeTree(t, srcB, 2)
			_, _, err := s.Commit(ctx, key, srcA, "a", meta(10, 1))
			must.NoError(t, err)

			paused, resume := pauseFirstCommit(t)
			first := make(chan error, 1)
			go func() {
				_, _, err := s.Commit(ctx, key, srcA, "a", meta(tc.firstStep, 2))
				first <- err
			}()
			<-paused
			second := make(chan error, 1)
			go func() {
				_, _, err := s.Commit(ctx, key, srcB, "b", meta(tc.second, 2))
				second <- err
			}()
			select {
			case err := <-second:
				t.Fatalf("second commit finished while the first held the key lock: %v", err)
			case <-time.After(100 * time.Millisecond):
			}
			close(resume)
			must.NoError(t, <-first)
			err = <-second
			if tc.wantStale {
				must.ErrorIs(t, err, ErrStale)
			} else {
				must.NoError(t, err)
			}
			m, err := s.Latest(key)
			must.NoError(t, err)
			must.Eq(t, tc.wantNewestStep, m.Meta[MetaStep])
		})
	}
}

// setManifestMeta rewrites generation gen's manifest meta, as a store
// written by an older driver may hold it (Commit refuses such meta now).
func setManifestMeta(t *testing.T, s *Store, key Key, gen uint64, meta map[string]string) {
	t.Helper()
	dir, err := key.dir(s.root)
	must.NoError(t, err)
	p := filepath.Join(dir, ManifestName(gen))
	b, err := os.ReadFile(p)
	must.NoError(t, err)
	var m map[string]any
	must.NoError(t, json.Unmarshal(b, &m))
	m["meta"] = meta
	b, err = json.Marshal(m)
	must.NoError(t, err)
	must.NoError(t, os.WriteFile(p, b, 0o600))
}

// TestCommitRefusesMalformedOrderMeta: a commit whose step or sequence is
// not a decimal integer within 0..MaxOrderValue is refused, naming the
// meta key, and writes nothing.
func TestCommitRefusesMalformedOrderMeta(t *testing.T) {
	cases := []struct {
		name string
		meta map[string]string
		want string
	}{
		{"step 2^64-1", map[string]string{MetaStep: "18446744073709551615", MetaSequence: "1"}, "meta step: \"18446744073709551615\""},
		{"step 2^53", map[string]string{MetaStep: "9007199254740992", MetaSequence: "1"}, "meta step"},
		{"sequence 2^53", map[string]string{MetaSequence: "9007199254740992"}, "meta sequence"},
		{"negative step", map[string]string{MetaStep: "-1", MetaSequence: "1"}, "meta step"},
		{"float step", map[string]string{MetaStep: "1.5", MetaSequence: "1"}, "meta step"},
		{"empty sequence", map[string]string{MetaSequence: ""}, "meta sequence"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, Options{})
			key := testKey("bad-order")
			src := t.TempDir()
			writeTree(t, src, 1)
			_, _, err := s.Commit(context.Background(), key, src, "n", tc.meta)
			must.ErrorIs(t, err, ErrInvalid)
			must.StrContains(t, err.Error(), tc.want)
			_, err = s.Latest(key)
			must.ErrorIs(t, err, ErrNoCheckpoint)
		})
	}
	s := openTestStore(t, Options{})
	src := t.TempDir()
	writeTree(t, src, 1)
	_, _, err := s.Commit(context.Background(), testKey("max"), src, "n", meta(MaxOrderValue, MaxOrderValue))
	must.NoError(t, err, must.Sprint("the bound itself is allowed"))
}

// TestOutOfBoundsGenerationOrdersNothing: a generation an older driver
// committed with a step above MaxOrderValue (task meta could set it) no
// longer holds the key's later checkpoints back, and still restores.
func TestOutOfBoundsGenerationOrdersNothing(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{Retain: 5})
	key := testKey("poisoned")
	key.Shared = true
	src := t.TempDir()
	writeTree(t, src, 1)
	_, _, err := s.Commit(ctx, key, src, "old-driver", meta(1, 1))
	must.NoError(t, err)
	setManifestMeta(t, s, key, 1, map[string]string{MetaStep: "18446744073709551615", MetaSequence: "1"})

	_, _, err = s.Commit(ctx, key, src, "n", meta(5, 2))
	must.NoError(t, err, must.Sprint("a real step after a poisoned generation"))
	_, _, err = s.Commit(ctx, key, src, "n", meta(3, 3))
	must.ErrorIs(t, err, ErrStale, must.Sprint("real steps still order"))

	dst := filepath.Join(t.TempDir(), "restore")
	res, err := s.Restore(ctx, key, dst)
	must.NoError(t, err)
	must.Eq(t, uint64(2), res.Manifest.Generation)
	must.NoError(t, s.DeleteGeneration(key, 2))
	res, err = s.Restore(ctx, key, filepath.Join(t.TempDir(), "restore"))
	must.NoError(t, err, must.Sprint("the poisoned generation itself still restores"))
	must.Eq(t, uint64(1), res.Manifest.Generation)
}
