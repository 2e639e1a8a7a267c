package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{})
	key := testKey("roundtrip")
	src := t.TempDir()
	writeTree(t, src, 1)

	m, stats, err := s.Commit(ctx, key, src, "client1", map[string]string{"step": "42"})
	must.NoError(t, err)
	must.Eq(t, uint64(1), m.Generation)
	must.Eq(t, uint64(1), stats.Generation)
	must.Eq(t, 5, stats.Files)
	must.Eq(t, stats.Bytes, stats.NewBytes)
	must.Eq(t, m.TotalBytes, stats.Bytes)
	must.Eq(t, "client1", m.Node)
	must.Eq(t, "42", m.Meta["step"])

	dst := filepath.Join(t.TempDir(), "ckpt")
	res, err := s.Restore(ctx, key, dst)
	must.NoError(t, err)
	must.Eq(t, uint64(1), res.Manifest.Generation)
	must.SliceEmpty(t, res.FellBack)
	must.Eq(t, snapshot(t, src), snapshot(t, dst))

	// Restoring over an existing directory replaces its contents.
	must.NoError(t, os.WriteFile(filepath.Join(dst, "stale"), []byte("x"), 0o600))
	_, err = s.Restore(ctx, key, dst)
	must.NoError(t, err)
	must.Eq(t, snapshot(t, src), snapshot(t, dst))

	// An unchanged second commit writes no new chunk bytes.
	m2, stats2, err := s.Commit(ctx, key, src, "client2", nil)
	must.NoError(t, err)
	must.Eq(t, uint64(2), m2.Generation)
	must.Eq(t, int64(0), stats2.NewBytes)

	latest, err := s.Latest(key)
	must.NoError(t, err)
	must.Eq(t, uint64(2), latest.Generation)
	must.Eq(t, "client2", latest.Node)
	all, err := s.List(key)
	must.NoError(t, err)
	must.Len(t, 2, all)
	must.Eq(t, uint64(1), all[0].Generation)
}

func TestEmptyCheckpoint(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{})
	key := testKey("empty")
	_, stats, err := s.Commit(ctx, key, t.TempDir(), "n", nil)
	must.NoError(t, err)
	must.Eq(t, 0, stats.Files)
	dst := filepath.Join(t.TempDir(), "ckpt")
	_, err = s.Restore(ctx, key, dst)
	must.NoError(t, err)
	ents, err := os.ReadDir(dst)
	must.NoError(t, err)
	must.SliceEmpty(t, ents)
}

func TestNoCheckpoint(t *testing.T) {
	s := openTestStore(t, Options{})
	key := testKey("never")
	_, err := s.Restore(context.Background(), key, filepath.Join(t.TempDir(), "x"))
	must.ErrorIs(t, err, ErrNoCheckpoint)
	_, err = s.Latest(key)
	must.ErrorIs(t, err, ErrNoCheckpoint)
	ms, err := s.List(key)
	must.NoError(t, err)
	must.SliceEmpty(t, ms)
}

func TestCommitBadSource(t *testing.T) {
	s := openTestStore(t, Options{})
	_, _, err := s.Commit(context.Background(), testKey("bad"), filepath.Join(t.TempDir(), "missing"), "n", nil)
	must.ErrorIs(t, err, os.ErrNotExist)
	f := filepath.Join(t.TempDir(), "file")
	must.NoError(t, os.WriteFile(f, nil, 0o600))
	_, _, err = s.Commit(context.Background(), testKey("bad"), f, "n", nil)
	must.ErrorIs(t, err, ErrInvalid)
	must.False(t, errors.Is(err, ErrUnavailable))
}
