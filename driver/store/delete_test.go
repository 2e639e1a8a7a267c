package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

// TestDelete deletes one key and checks that only it went, that GC then
// frees its chunks but not the ones other keys share, and that bad input
// deletes nothing.
func TestDelete(t *testing.T) {
	ctx := context.Background()
	keep := testKey("keep")
	group := Key{Namespace: "default", Job: "dp", Group: "worker", Task: "t", Shared: true, Incarnation: "7"}
	cases := []struct {
		name    string
		key     Key
		busy    bool
		wantErr error
		wantN   int
	}{
		{"alloc key", testKey("victim"), false, nil, 2},
		{"group key with incarnation", group, false, nil, 2},
		{"unknown key", testKey("nobody"), false, ErrNoCheckpoint, 0},
		{"other incarnation of an existing job", Key{Namespace: "default", Job: "dp", Group: "worker", Task: "t", Shared: true, Incarnation: "8"}, false, ErrNoCheckpoint, 0},
		{"invalid key", Key{Namespace: "default", Job: "", Group: "g", Task: "t"}, false, ErrInvalid, 0},
		{"commit in flight", testKey("victim"), true, ErrBusy, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, Options{})
			shared, own := t.TempDir(), t.TempDir()
			writeTree(t, shared, 1)
			writeTree(t, own, 2)
			_, _, err := s.Commit(ctx, keep, shared, "n", nil)
			must.NoError(t, err)
			for _, k := range []Key{testKey("victim"), group} {
				_, _, err = s.Commit(ctx, k, shared, "n", nil)
				must.NoError(t, err)
				_, _, err = s.Commit(ctx, k, own, "n", nil)
				must.NoError(t, err)
			}
			before := storeFiles(t, s)

			if tc.busy {
				paused, resume := pauseFirstCommit(t)
				done := make(chan error, 1)
				go func() {
					_, _, err := s.Commit(ctx, tc.key, own, "n", nil)
					done <- err
				}()
				<-paused
				_, err = s.Delete(tc.key)
				close(resume)
				must.NoError(t, <-done)
			} else {
				var n int
				n, err = s.Delete(tc.key)
				must.Eq(t, tc.wantN, n)
			}
			if tc.wantErr != nil {
				must.ErrorIs(t, err, tc.wantErr)
				if !tc.busy {
					must.Eq(t, before, storeFiles(t, s), must.Sprint("a refused delete changed the store"))
				}
				return
			}
			must.NoError(t, err)
			_, err = s.Latest(tc.key)
			must.ErrorIs(t, err, ErrNoCheckpoint)
			dir, _ := tc.key.dir(s.root)
			_, err = os.Stat(dir)
			must.True(t, os.IsNotExist(err), must.Sprint("key directory left behind"))

			// The deleted key's own chunks go with GC; shared ones stay.
			must.NoError(t, s.GC(keep))
			for _, k := range []Key{keep, testKey("victim"), group} {
				if k == tc.key {
					continue
				}
				dst := filepath.Join(t.TempDir(), "ckpt")
				_, err := s.Restore(ctx, k, dst)
				must.NoError(t, err)
			}
			// A new commit of the deleted key starts again at generation 1.
			m, _, err := s.Commit(ctx, tc.key, own, "n", nil)
			must.NoError(t, err)
			must.Eq(t, uint64(1), m.Generation)
		})
	}
}

// storeFiles lists every path below the store root.
func storeFiles(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	must.NoError(t, filepath.WalkDir(s.root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out = append(out, p)
		return nil
	}))
	return out
}

func TestKeysListsKeysWithGenerations(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{})
	src := t.TempDir()
	writeTree(t, src, 1)
	keys := []Key{
		testKey("a"),
		{Namespace: "ns", Job: "batch/dispatch-1", Group: "g", Task: "t", Index: 3, Incarnation: "12"},
		{Namespace: "default", Job: "dp", Group: "worker", Task: "t", Shared: true, Incarnation: "7"},
	}
	for _, k := range keys {
		_, _, err := s.Commit(ctx, k, src, "n", nil)
		must.NoError(t, err)
	}
	// Not keys: an emptied key, a foreign directory, a stray file.
	_, _, err := s.Commit(ctx, testKey("gone"), src, "n", nil)
	must.NoError(t, err)
	_, err = s.Delete(testKey("gone"))
	must.NoError(t, err)
	must.NoError(t, os.MkdirAll(filepath.Join(s.root, "x", "y", "z", "w", "notaslot"), 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(s.root, "README"), []byte("x"), 0o644))

	got, err := s.Keys()
	must.NoError(t, err)
	want := []string{"default/a/train/trainer/0", "default/dp@7/worker/t/group", "ns/batch%2Fdispatch-1@12/g/t/3"}
	var gotS []string
	for _, k := range got {
		gotS = append(gotS, k.String())
	}
	must.Eq(t, want, gotS)
}
