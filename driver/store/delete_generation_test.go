package store

import (
	"context"
	"os"
	"testing"

	"github.com/shoenig/test/must"
)

// TestDeleteGeneration drops one generation: the one before becomes the
// newest, for restores and for ordering; dropping the only generation
// deletes the key; bad input and a busy key change nothing.
func TestDeleteGeneration(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*Store, Key) {
		s := openTestStore(t, Options{Retain: 5})
		key := testKey("drop")
		src := t.TempDir()
		writeTree(t, src, 1)
		for _, m := range []map[string]string{meta(10, 1), meta(MaxOrderValue, 2)} {
			_, _, err := s.Commit(ctx, key, src, "n", m)
			must.NoError(t, err)
		}
		return s, key
	}

	t.Run("newest", func(t *testing.T) {
		s, key := setup(t)
		src := t.TempDir()
		writeTree(t, src, 2)
		_, _, err := s.Commit(ctx, key, src, "n", meta(20, 3))
		must.ErrorIs(t, err, ErrStale, must.Sprint("generation 2's step holds the key back"))
		must.NoError(t, s.DeleteGeneration(key, 2))
		m, err := s.Latest(key)
		must.NoError(t, err)
		must.Eq(t, uint64(1), m.Generation)
		_, _, err = s.Commit(ctx, key, src, "n", meta(20, 3))
		must.NoError(t, err)
	})
	t.Run("older", func(t *testing.T) {
		s, key := setup(t)
		must.NoError(t, s.DeleteGeneration(key, 1))
		ms := mustList(t, s, key)
		must.Len(t, 1, ms)
		must.Eq(t, uint64(2), ms[0].Generation)
	})
	t.Run("the only generation deletes the key", func(t *testing.T) {
		s, key := setup(t)
		must.NoError(t, s.DeleteGeneration(key, 1))
		must.NoError(t, s.DeleteGeneration(key, 2))
		keys, err := s.Keys()
		must.NoError(t, err)
		must.SliceEmpty(t, keys)
		dir, _ := key.dir(s.root)
		_, err = os.Stat(dir)
		must.True(t, os.IsNotExist(err))
	})
	refusals := []struct {
		name string
		key  Key
		gen  uint64
		want error
	}{
		{"unknown generation", testKey("drop"), 7, ErrNoCheckpoint},
		{"unknown key", testKey("nobody"), 1, ErrNoCheckpoint},
		{"invalid key", Key{Namespace: "default", Group: "g", Task: "t"}, 1, ErrInvalid},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := setup(t)
			before := storeFiles(t, s)
			must.ErrorIs(t, s.DeleteGeneration(tc.key, tc.gen), tc.want)
			must.Eq(t, before, storeFiles(t, s))
		})
	}
	t.Run("busy", func(t *testing.T) {
		s, key := setup(t)
		paused, resume := pauseFirstCommit(t)
		done := make(chan error, 1)
		src := t.TempDir()
		writeTree(t, src, 3)
		go func() {
			_, _, err := s.Commit(ctx, key, src, "n", meta(MaxOrderValue, 3))
			done <- err
		}()
		<-paused
		err := s.DeleteGeneration(key, 2)
		close(resume)
		must.NoError(t, <-done)
		must.ErrorIs(t, err, ErrBusy)
		must.Len(t, 3, mustList(t, s, key))
	})
}
