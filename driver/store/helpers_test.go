package store

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

// testChunkSize keeps test checkpoints multi-chunk while small.
const testChunkSize = 16 << 10

func testLogger(t testing.TB) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: os.Stderr})
}

// openTestStore opens a store in a fresh temp root with small chunks.
func openTestStore(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.ChunkSize == 0 {
		opts.ChunkSize = testChunkSize
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	s, err := Open(t.TempDir(), opts)
	must.NoError(t, err)
	return s
}

func testKey(job string) Key {
	return Key{Namespace: "default", Job: job, Group: "train", Task: "trainer", Index: 0}
}

// randomBytes returns n deterministic pseudo-random bytes.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16)}))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for k := 0; k < 8; k++ {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// writeTree creates a checkpoint-like tree in dir: nested directories, an
// empty file, small and multi-chunk files, a read-only file and a symlink.
func writeTree(t testing.TB, dir string, seed uint64) {
	t.Helper()
	must.NoError(t, os.MkdirAll(filepath.Join(dir, "shards", "deep"), 0o755))
	must.NoError(t, os.MkdirAll(filepath.Join(dir, "empty-dir"), 0o700))
	files := map[string][]byte{
		"model.bin":              randomBytes(seed, 5*testChunkSize+123),
		"optimizer.bin":          randomBytes(seed+1, 2*testChunkSize),
		"shards/deep/part-0.bin": randomBytes(seed+2, 777),
		"shards/empty":           nil,
		"meta.json":              []byte(`{"step": 42}`),
	}
	for p, b := range files {
		must.NoError(t, os.WriteFile(filepath.Join(dir, p), b, 0o644))
	}
	must.NoError(t, os.Chmod(filepath.Join(dir, "meta.json"), 0o444))
	must.NoError(t, os.Symlink("model.bin", filepath.Join(dir, "latest")))
	must.NoError(t, os.Symlink("../model.bin", filepath.Join(dir, "shards", "model-link")))
}

// snapshot describes every entry below dir: type, permissions, content
// digest or link target, and file modification time.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		must.NoError(t, err)
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		must.NoError(t, err)
		desc := info.Mode().String()
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			must.NoError(t, err)
			sum := sha256.Sum256(b)
			desc += " " + hex.EncodeToString(sum[:]) + " " + info.ModTime().UTC().String()
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			must.NoError(t, err)
			desc += " -> " + target
		}
		out[filepath.ToSlash(rel)] = desc
		return nil
	})
	must.NoError(t, err)
	return out
}
