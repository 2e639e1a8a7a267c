package store

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/shoenig/test/must"
)

// TestCommitCrash kills a helper process at each step of a commit of
// generation 2 and checks that the store then restores exactly generation 1
// (crash before the manifest rename) or exactly generation 2 (after it), that
// the key lock was released, and that GC removes the debris.
func TestCommitCrash(t *testing.T) {
	cases := []struct {
		step    string
		nth     int
		wantGen uint64
	}{
		{StepChunkTempWritten, 1, 1},
		{StepChunkTempWritten, 4, 1},
		{StepChunkPublished, 1, 1},
		{StepChunkPublished, 5, 1},
		{StepChunksSynced, 1, 1},
		{StepManifestTempWritten, 1, 1},
		{StepManifestPublished, 1, 2},
		{StepCommitted, 1, 2},
	}
	for _, tc := range cases {
		t.Run(tc.step+"#"+strconv.Itoa(tc.nth), func(t *testing.T) {
			ctx := context.Background()
			s := openTestStore(t, Options{Retain: 100})
			key := testKey("crash")
			src1, src2 := t.TempDir(), t.TempDir()
			writeTree(t, src1, 1)
			writeTree(t, src2, 2)
			_, _, err := s.Commit(ctx, key, src1, "n", nil)
			must.NoError(t, err)

			cmd := helperCmd(t, "commit", s.root, src2, key.Job,
				envCrashAt+"="+tc.step, envCrashN+"="+strconv.Itoa(tc.nth))
			out, err := cmd.CombinedOutput()
			must.True(t, killedBySIGKILL(err), must.Sprintf("helper: %v: %s", err, out))

			dst := filepath.Join(t.TempDir(), "ckpt")
			res, err := s.Restore(ctx, key, dst)
			must.NoError(t, err)
			must.SliceEmpty(t, res.FellBack)
			must.Eq(t, tc.wantGen, res.Manifest.Generation)
			want := src1
			if tc.wantGen == 2 {
				want = src2
			}
			must.Eq(t, snapshot(t, want), snapshot(t, dst))

			// The lock died with the helper: the next commit proceeds.
			m, _, err := s.Commit(ctx, key, src2, "n", nil)
			must.NoError(t, err)
			must.Eq(t, tc.wantGen+1, m.Generation)

			must.NoError(t, s.GC(key))
			tmps, err := os.ReadDir(s.tmpDir())
			must.NoError(t, err)
			must.SliceEmpty(t, tmps)
			keyDir, _ := key.dir(s.root)
			ents, err := os.ReadDir(keyDir)
			must.NoError(t, err)
			for _, e := range ents {
				must.StrNotContains(t, e.Name(), ".tmp-")
			}
			// Every retained generation still verifies.
			for _, m := range mustList(t, s, key) {
				must.NoError(t, verifyGeneration(t, s, m))
			}
		})
	}
}

// TestRestoreCrash kills a helper restoring generation 2 over a directory
// holding generation 1 and checks the directory holds exactly one of them.
func TestRestoreCrash(t *testing.T) {
	cases := []struct {
		step    string
		wantNew bool
	}{
		{StepRestoreStaged, false},
		{StepRestoreSwapped, true},
	}
	for _, tc := range cases {
		t.Run(tc.step, func(t *testing.T) {
			ctx := context.Background()
			s := openTestStore(t, Options{})
			key := testKey("restorecrash")
			src1, src2 := t.TempDir(), t.TempDir()
			writeTree(t, src1, 1)
			writeTree(t, src2, 2)
			_, _, err := s.Commit(ctx, key, src1, "n", nil)
			must.NoError(t, err)
			dst := filepath.Join(t.TempDir(), "ckpt")
			_, err = s.Restore(ctx, key, dst)
			must.NoError(t, err)
			_, _, err = s.Commit(ctx, key, src2, "n", nil)
			must.NoError(t, err)

			out, err := helperCmd(t, "restore", s.root, dst, key.Job, envCrashAt+"="+tc.step, envCrashN+"=1").CombinedOutput()
			must.True(t, killedBySIGKILL(err), must.Sprintf("helper: %v: %s", err, out))
			want := src1
			if tc.wantNew {
				want = src2
			}
			must.Eq(t, snapshot(t, want), snapshot(t, dst))

			// The next restore cleans up the leftovers.
			_, err = s.Restore(ctx, key, dst)
			must.NoError(t, err)
			must.Eq(t, snapshot(t, src2), snapshot(t, dst))
			ents, err := os.ReadDir(filepath.Dir(dst))
			must.NoError(t, err)
			must.Len(t, 1, ents)
		})
	}
}

func mustList(t *testing.T, s *Store, key Key) []*Manifest {
	t.Helper()
	ms, err := s.List(key)
	must.NoError(t, err)
	return ms
}

// verifyGeneration checks every chunk of m against its digest.
func verifyGeneration(t *testing.T, s *Store, m *Manifest) error {
	t.Helper()
	var buf []byte
	f, err := os.CreateTemp(t.TempDir(), "verify")
	must.NoError(t, err)
	defer f.Close()
	for i := range m.Files {
		e := &m.Files[i]
		for c := range e.Chunks {
			if err := s.restoreChunk(f, e, c, m.ChunkSize, &buf); err != nil {
				return err
			}
		}
	}
	return nil
}
