package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

// commitGenerations commits n distinct generations of key and returns the
// snapshot of each source tree, by generation (index 0 unused).
func commitGenerations(t *testing.T, s *Store, key Key, n int) []map[string]string {
	t.Helper()
	snaps := []map[string]string{nil}
	for g := 1; g <= n; g++ {
		src := t.TempDir()
		writeTree(t, src, uint64(g*100))
		_, _, err := s.Commit(context.Background(), key, src, "client1", nil)
		must.NoError(t, err)
		snaps = append(snaps, snapshot(t, src))
	}
	return snaps
}

// uniqueChunk returns a chunk of generation gen that generation gen-1 does
// not reference.
func uniqueChunk(t *testing.T, s *Store, key Key, gen uint64) string {
	t.Helper()
	ms, err := s.List(key)
	must.NoError(t, err)
	older := map[string]bool{}
	var newest *Manifest
	for _, m := range ms {
		if m.Generation < gen {
			for _, f := range m.Files {
				for _, c := range f.Chunks {
					older[c] = true
				}
			}
		}
		if m.Generation == gen {
			newest = m
		}
	}
	must.NotNil(t, newest)
	for _, f := range newest.Files {
		for _, c := range f.Chunks {
			if !older[c] {
				return c
			}
		}
	}
	t.Fatal("no unique chunk")
	return ""
}

func TestRestoreFallsBackOnCorruption(t *testing.T) {
	cases := []struct {
		name    string
		corrupt func(t *testing.T, s *Store, key Key)
	}{
		{"flipped byte in chunk", func(t *testing.T, s *Store, key Key) {
			p := s.chunkPath(uniqueChunk(t, s, key, 3))
			b, err := os.ReadFile(p)
			must.NoError(t, err)
			b[len(b)/2] ^= 0x40
			must.NoError(t, os.WriteFile(p, b, 0o600))
		}},
		{"truncated chunk", func(t *testing.T, s *Store, key Key) {
			must.NoError(t, os.Truncate(s.chunkPath(uniqueChunk(t, s, key, 3)), 10))
		}},
		{"extended chunk", func(t *testing.T, s *Store, key Key) {
			f, err := os.OpenFile(s.chunkPath(uniqueChunk(t, s, key, 3)), os.O_APPEND|os.O_WRONLY, 0)
			must.NoError(t, err)
			_, err = f.Write([]byte("junk"))
			must.NoError(t, err)
			must.NoError(t, f.Close())
		}},
		{"missing chunk", func(t *testing.T, s *Store, key Key) {
			must.NoError(t, os.Remove(s.chunkPath(uniqueChunk(t, s, key, 3))))
		}},
		{"garbled manifest", func(t *testing.T, s *Store, key Key) {
			dir, _ := key.dir(s.root)
			must.NoError(t, os.WriteFile(filepath.Join(dir, ManifestName(3)), []byte("{not json"), 0o600))
		}},
		{"manifest with escaping path", func(t *testing.T, s *Store, key Key) {
			dir, _ := key.dir(s.root)
			m, err := readManifest(dir, 3)
			must.NoError(t, err)
			m.Files[0].Path = "../../escaped"
			rewriteManifest(t, dir, m)
		}},
		{"manifest with escaping symlink", func(t *testing.T, s *Store, key Key) {
			dir, _ := key.dir(s.root)
			m, err := readManifest(dir, 3)
			must.NoError(t, err)
			for i := range m.Files {
				if m.Files[i].Link != "" {
					m.Files[i].Link = "../../../etc/passwd"
				}
			}
			rewriteManifest(t, dir, m)
		}},
		{"manifest with wrong size", func(t *testing.T, s *Store, key Key) {
			dir, _ := key.dir(s.root)
			m, err := readManifest(dir, 3)
			must.NoError(t, err)
			for i := range m.Files {
				if m.Files[i].Size > 0 {
					m.Files[i].Size += testChunkSize
					break
				}
			}
			rewriteManifest(t, dir, m)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, Options{Retain: 5})
			key := testKey("corrupt")
			snaps := commitGenerations(t, s, key, 3)
			tc.corrupt(t, s, key)

			dst := filepath.Join(t.TempDir(), "ckpt")
			res, err := s.Restore(context.Background(), key, dst)
			must.NoError(t, err)
			must.Eq(t, uint64(2), res.Manifest.Generation)
			must.Eq(t, []uint64{3}, res.FellBack)
			must.Eq(t, snaps[2], snapshot(t, dst))
			_, err = os.Stat(filepath.Join(filepath.Dir(dst), "escaped"))
			must.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}

func rewriteManifest(t *testing.T, keyDir string, m *Manifest) {
	t.Helper()
	must.NoError(t, os.Remove(filepath.Join(keyDir, ManifestName(m.Generation))))
	// writeManifest does not check; readManifest will.
	must.NoError(t, writeManifest(keyDir, m))
}

func TestRestoreAllCorrupt(t *testing.T) {
	s := openTestStore(t, Options{})
	key := testKey("allbad")
	commitGenerations(t, s, key, 2)
	dir, _ := key.dir(s.root)
	for g := uint64(1); g <= 2; g++ {
		must.NoError(t, os.WriteFile(filepath.Join(dir, ManifestName(g)), []byte("garbage"), 0o600))
	}
	dst := filepath.Join(t.TempDir(), "ckpt")
	must.NoError(t, os.Mkdir(dst, 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(dst, "keep"), []byte("x"), 0o600))
	_, err := s.Restore(context.Background(), key, dst)
	must.ErrorIs(t, err, ErrNoCheckpoint)
	must.ErrorIs(t, err, ErrCorrupt)
	// The destination is untouched.
	must.MapLen(t, 1, snapshot(t, dst))
}

// TestCorruptSharedChunkHeals checks that a corrupt chunk is quarantined by
// Restore so that the next commit of the same data writes it afresh.
func TestCorruptSharedChunkHeals(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{})
	key := testKey("heal")
	src := t.TempDir()
	writeTree(t, src, 7)
	m, _, err := s.Commit(ctx, key, src, "n", nil)
	must.NoError(t, err)
	victim := m.Files[0].Chunks
	for _, f := range m.Files {
		if len(f.Chunks) > 0 {
			victim = f.Chunks
			break
		}
	}
	must.NoError(t, os.WriteFile(s.chunkPath(victim[0]), []byte("rot"), 0o600))

	_, err = s.Restore(ctx, key, filepath.Join(t.TempDir(), "a"))
	must.ErrorIs(t, err, ErrCorrupt)

	_, stats, err := s.Commit(ctx, key, src, "n", nil)
	must.NoError(t, err)
	must.Positive(t, stats.NewBytes)
	dst := filepath.Join(t.TempDir(), "b")
	res, err := s.Restore(ctx, key, dst)
	must.NoError(t, err)
	must.Eq(t, uint64(2), res.Manifest.Generation)
	must.Eq(t, snapshot(t, src), snapshot(t, dst))

	// GC empties the quarantine.
	q, err := os.ReadDir(filepath.Join(s.root, ".corrupt"))
	must.NoError(t, err)
	must.Len(t, 1, q)
	must.NoError(t, s.GC(key))
	q, err = os.ReadDir(filepath.Join(s.root, ".corrupt"))
	must.NoError(t, err)
	must.SliceEmpty(t, q)
}
