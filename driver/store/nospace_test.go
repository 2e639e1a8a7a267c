package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shoenig/test/must"
)

// TestExplainNoSpace: an ENOSPC says "no free inodes" only when statfs
// shows free space and no free inode; the error still matches
// syscall.ENOSPC.
func TestExplainNoSpace(t *testing.T) {
	orig := statFS
	t.Cleanup(func() { statFS = orig })
	enospc := fmt.Errorf("create chunk: %w", &fs.PathError{Op: "open", Path: "/s/.tmp/chunk-1", Err: syscall.ENOSPC})
	for _, tc := range []struct {
		name   string
		usage  fsUsage
		err    error
		inodes bool
	}{
		{"inodes out, space free", fsUsage{files: 1000, freeFiles: 0, freeBytes: 1 << 30}, enospc, true},
		{"space out", fsUsage{files: 1000, freeFiles: 10, freeBytes: 0}, enospc, false},
		{"both out", fsUsage{files: 1000, freeFiles: 0, freeBytes: 0}, enospc, false},
		{"no inode count (some file systems)", fsUsage{files: 0, freeFiles: 0, freeBytes: 1 << 30}, enospc, false},
		{"not ENOSPC", fsUsage{files: 1000, freeFiles: 0, freeBytes: 1 << 30}, syscall.EIO, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			statFS = func(string) (fsUsage, error) { return tc.usage, nil }
			got := explainNoSpace(tc.err, "/s")
			must.True(t, errors.Is(got, tc.err))
			if !tc.inodes {
				must.Eq(t, tc.err.Error(), got.Error())
				return
			}
			must.ErrorIs(t, got, ErrNoInodes)
			must.ErrorIs(t, got, syscall.ENOSPC)
			must.StrContains(t, got.Error(), "create chunk: open /s/.tmp/chunk-1: no free inodes (all 1000 inodes")
			must.StrNotContains(t, got.Error(), "no space left on device")
		})
	}
}

// mountInodeTmpfs mounts a tmpfs with room for inodes files at a fresh
// directory (skipped where the test may not mount: not root, no
// CAP_SYS_ADMIN).
func mountInodeTmpfs(t *testing.T, inodes int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fs")
	must.NoError(t, os.Mkdir(dir, 0o755))
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=64m,nr_inodes=%d", inodes)); err != nil {
		t.Skipf("cannot mount a tmpfs with nr_inodes here: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// countChunks counts the chunks in the store.
func countChunks(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	must.NoError(t, filepath.WalkDir(s.chunksDir(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	}))
	return n
}

// TestCommitOutOfInodes runs a commit on a real file system (a tmpfs
// with few inodes) whose last free inodes are taken once the commit's
// chunks are written, so its manifest cannot be created: the commit fails
// saying "no free inodes" (df -h shows free space), takes back the chunks
// it published at once instead of leaving them to hold inodes until the
// next GC, the previous generation still restores, and once inodes are
// free the next commit works.
func TestCommitOutOfInodes(t *testing.T) {
	root := mountInodeTmpfs(t, 600)
	s, err := Open(root, Options{ChunkSize: testChunkSize, Logger: testLogger(t)})
	must.NoError(t, err)
	k := testKey("inodes")
	src := t.TempDir()
	writeTree(t, src, 1)
	want := snapshot(t, src)
	_, _, err = s.Commit(context.Background(), k, src, "n", nil)
	must.NoError(t, err)
	before := countChunks(t, s)

	// Another state: new chunks. Once they are published, something else
	// takes every inode left.
	must.NoError(t, os.RemoveAll(src))
	must.NoError(t, os.Mkdir(src, 0o755))
	writeTree(t, src, 2)
	filler := filepath.Join(root, "filler")
	must.NoError(t, os.Mkdir(filler, 0o755))
	published := 0
	testHook = func(step string) {
		if step != StepChunksSynced {
			return
		}
		published = countChunks(t, s) - before
		for i := 0; ; i++ {
			f, err := os.Create(filepath.Join(filler, fmt.Sprint(i)))
			if err != nil {
				must.ErrorIs(t, err, syscall.ENOSPC)
				return
			}
			_ = f.Close()
		}
	}
	t.Cleanup(func() { testHook = nil })
	_, _, err = s.Commit(context.Background(), k, src, "n", nil)
	testHook = nil
	must.Error(t, err)
	t.Logf("commit: %v", err)
	must.ErrorIs(t, err, syscall.ENOSPC)
	must.ErrorIs(t, err, ErrNoInodes)
	must.StrContains(t, err.Error(), "no free inodes")
	must.StrNotContains(t, err.Error(), "no space left on device")
	must.Positive(t, published)
	must.Eq(t, before, countChunks(t, s), must.Sprintf("the failed commit left %d new chunks", countChunks(t, s)-before))

	// The previous generation restores; freed inodes, the next commit works.
	must.NoError(t, os.RemoveAll(filler))
	dst := filepath.Join(t.TempDir(), "restored")
	res, err := s.Restore(context.Background(), k, dst)
	must.NoError(t, err)
	must.Eq(t, uint64(1), res.Manifest.Generation)
	must.Eq(t, want, snapshot(t, dst))
	m, _, err := s.Commit(context.Background(), k, src, "n", nil)
	must.NoError(t, err)
	must.Eq(t, uint64(2), m.Generation)
}
