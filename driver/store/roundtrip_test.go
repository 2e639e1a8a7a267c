package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
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

// TestRestoreWithoutExchange covers file systems without renameat2
// RENAME_EXCHANGE, where the swap falls back to two renames.
func TestRestoreWithoutExchange(t *testing.T) {
	exchangeFn = func(int, string, string) error { return errExchangeUnsupported }
	t.Cleanup(func() { exchangeFn = exchange })
	ctx := context.Background()
	s := openTestStore(t, Options{})
	key := testKey("noexchange")
	src := t.TempDir()
	writeTree(t, src, 11)
	_, _, err := s.Commit(ctx, key, src, "n", nil)
	must.NoError(t, err)
	dst := filepath.Join(t.TempDir(), "ckpt")
	must.NoError(t, os.Mkdir(dst, 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(dst, "old"), []byte("old"), 0o600))
	_, err = s.Restore(ctx, key, dst)
	must.NoError(t, err)
	must.Eq(t, snapshot(t, src), snapshot(t, dst))
	ents, err := os.ReadDir(filepath.Dir(dst))
	must.NoError(t, err)
	must.Len(t, 1, ents)
}

// TestRestoreOwnership checks restored files take the owner of the existing
// destination directory, which the driver prepares for the task's user.
func TestRestoreOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	ctx := context.Background()
	s := openTestStore(t, Options{})
	key := testKey("owner")
	src := t.TempDir()
	writeTree(t, src, 12)
	_, _, err := s.Commit(ctx, key, src, "n", nil)
	must.NoError(t, err)
	dst := filepath.Join(t.TempDir(), "ckpt")
	must.NoError(t, os.Mkdir(dst, 0o770))
	must.NoError(t, os.Chmod(dst, 0o770))
	must.NoError(t, os.Chown(dst, 65534, 65534))
	_, err = s.Restore(ctx, key, dst)
	must.NoError(t, err)
	must.NoError(t, filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		must.NoError(t, err)
		fi, err := os.Lstat(p)
		must.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		must.Eq(t, uint32(65534), st.Uid, must.Sprintf("owner of %s", p))
		must.Eq(t, uint32(65534), st.Gid, must.Sprintf("group of %s", p))
		return nil
	}))
	fi, err := os.Stat(dst)
	must.NoError(t, err)
	must.Eq(t, os.FileMode(0o770), fi.Mode().Perm())
}

// TestRoundTripChunkSizes covers chunk sizes that allow direct I/O (multiples
// of 4 KiB) and ones that force the buffered path, with files ending on and
// off block and chunk boundaries.
func TestRoundTripChunkSizes(t *testing.T) {
	sizes := []int{0, 1, 4095, 4096, 4097, 5000, 8192, 12345, 65536, 65537}
	for _, chunk := range []int{4096, 5000, 8192, 65536} {
		t.Run(strconv.Itoa(chunk), func(t *testing.T) {
			ctx := context.Background()
			s := openTestStore(t, Options{ChunkSize: chunk})
			key := testKey("sizes")
			src := t.TempDir()
			for i, n := range sizes {
				must.NoError(t, os.WriteFile(filepath.Join(src, "f"+strconv.Itoa(n)), randomBytes(uint64(i), n), 0o644))
			}
			_, _, err := s.Commit(ctx, key, src, "n", nil)
			must.NoError(t, err)
			dst := filepath.Join(t.TempDir(), "ckpt")
			_, err = s.Restore(ctx, key, dst)
			must.NoError(t, err)
			must.Eq(t, snapshot(t, src), snapshot(t, dst))
			for _, m := range mustList(t, s, key) {
				must.NoError(t, verifyGeneration(t, s, m))
			}
		})
	}
}

// TestCommitCancelled checks a cancelled commit publishes nothing and leaves
// no temp files.
func TestCommitCancelled(t *testing.T) {
	s := openTestStore(t, Options{})
	key := testKey("cancel")
	src := t.TempDir()
	writeTree(t, src, 13)
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	testHook = func(step string) {
		if step == StepChunkTempWritten && calls.Add(1) == 2 {
			cancel()
		}
	}
	t.Cleanup(func() { testHook = nil })
	_, _, err := s.Commit(ctx, key, src, "n", nil)
	must.ErrorIs(t, err, context.Canceled)
	_, err = s.Latest(key)
	must.ErrorIs(t, err, ErrNoCheckpoint)
	tmps, err := os.ReadDir(s.tmpDir())
	must.NoError(t, err)
	must.SliceEmpty(t, tmps)
}
