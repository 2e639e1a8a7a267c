package store

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shoenig/test/must"
)

// listNames returns every path below dir, as raw bytes, sorted.
func listNames(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	var walk func(rel string)
	walk = func(rel string) {
		ents, err := os.ReadDir(filepath.Join(dir, rel))
		must.NoError(t, err)
		for _, e := range ents {
			p := filepath.Join(rel, e.Name())
			out = append(out, p)
			if e.IsDir() {
				walk(p)
			}
		}
	}
	walk("")
	slices.Sort(out)
	return out
}

// TestNonUTF8NamesRoundTrip: names are bytes on Linux. Files, directories
// and symlink targets whose names are not valid UTF-8 come back byte for
// byte; two names that differ only in invalid bytes stay two files. (JSON
// turned every invalid byte into U+FFFD: such names came back renamed, two
// of them collided and the generation was judged corrupt, and a directory
// with such a name failed every commit.)
func TestNonUTF8NamesRoundTrip(t *testing.T) {
	s := openTestStore(t, Options{})
	key := testKey("names")
	src := t.TempDir()
	must.NoError(t, os.WriteFile(filepath.Join(src, "a\xff"), []byte("ff"), 0o644))
	must.NoError(t, os.WriteFile(filepath.Join(src, "a\xfe"), []byte("fe"), 0o644))
	must.NoError(t, os.WriteFile(filepath.Join(src, "a\uFFFD"), []byte("replacement character"), 0o644))
	must.NoError(t, os.Mkdir(filepath.Join(src, "dir\x80\xc3"), 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(src, "dir\x80\xc3", "caf\xe9"), randomBytes(3, 2*testChunkSize+1), 0o600))
	must.NoError(t, os.Symlink("dir\x80\xc3/caf\xe9", filepath.Join(src, "link")))
	must.NoError(t, os.Symlink("a\xff", filepath.Join(src, "link\xff")))
	must.NoError(t, os.WriteFile(filepath.Join(src, "plain <&> \u2028 name"), []byte("ok"), 0o644))

	m, _, err := s.Commit(context.Background(), key, src, "n1", nil)
	must.NoError(t, err)
	must.Eq(t, manifestFormatBytes, m.Format)

	dst := filepath.Join(t.TempDir(), "dst")
	res, err := s.Restore(context.Background(), key, dst)
	must.NoError(t, err)
	must.SliceEmpty(t, res.FellBack)
	must.Eq(t, listNames(t, src), listNames(t, dst))
	must.Eq(t, snapshot(t, src), snapshot(t, dst))
	target, err := os.Readlink(filepath.Join(dst, "link\xff"))
	must.NoError(t, err)
	must.Eq(t, "a\xff", target)
}

// TestUTF8ManifestStaysFormat1: a tree whose names are all valid UTF-8 is
// written exactly as before (format 1, plain path and link fields), so
// older readers still read it.
func TestUTF8ManifestStaysFormat1(t *testing.T) {
	s := openTestStore(t, Options{})
	key := testKey("utf8")
	src := t.TempDir()
	writeTree(t, src, 1)
	m, _, err := s.Commit(context.Background(), key, src, "n1", nil)
	must.NoError(t, err)
	must.Eq(t, manifestFormat, m.Format)
	dir, err := key.dir(s.Root())
	must.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, ManifestName(1)))
	must.NoError(t, err)
	var raw struct {
		Files []map[string]any `json:"files"`
	}
	must.NoError(t, json.Unmarshal(b, &raw))
	for _, f := range raw.Files {
		must.MapContainsKey(t, f, "path")
		must.MapNotContainsKey(t, f, "path_bytes")
		must.MapNotContainsKey(t, f, "link_bytes")
	}
}

// TestFormat1ManifestRestores: a manifest in the form the store wrote before
// names were bytes (testdata/manifest-format1.json, with a name that the old
// encoding had already turned into U+FFFD) still restores.
func TestFormat1ManifestRestores(t *testing.T) {
	s := openTestStore(t, Options{})
	key := testKey("legacy")
	dir, err := key.dir(s.Root())
	must.NoError(t, err)
	must.NoError(t, os.MkdirAll(dir, 0o750))
	b, err := os.ReadFile(filepath.Join("testdata", "manifest-format1.json"))
	must.NoError(t, err)
	must.NoError(t, os.WriteFile(filepath.Join(dir, ManifestName(1)), b, 0o640))
	const chunk = "a1fdb77522c2312e981d9dbef2981f5e1990958848a3f3e0f4f74dc1549c2f41"
	must.NoError(t, os.WriteFile(s.chunkPath(chunk), []byte("hello, checkpoint\n"), 0o640))

	dst := filepath.Join(t.TempDir(), "dst")
	res, err := s.Restore(context.Background(), key, dst)
	must.NoError(t, err)
	must.Eq(t, 1, res.Manifest.Generation)
	must.Eq(t, "1200", res.Manifest.Meta["step"])
	must.Eq(t, []string{"l", "sub", "sub/a.txt", "sub/caf\uFFFD"}, listNames(t, dst))
	got, err := os.ReadFile(filepath.Join(dst, "l"))
	must.NoError(t, err)
	must.Eq(t, "hello, checkpoint\n", string(got))
}

// TestManifestNameEncodingRefusesBoth: an entry may carry a name in one
// form only.
func TestManifestNameEncodingRefusesBoth(t *testing.T) {
	var e FileEntry
	must.Error(t, json.Unmarshal([]byte(`{"path":"a","path_bytes":"YQ==","mode":420}`), &e))
	must.Error(t, json.Unmarshal([]byte(`{"path":"l","mode":134218239,"link":"a","link_bytes":"YQ=="}`), &e))
	must.NoError(t, json.Unmarshal([]byte(`{"path_bytes":"Yf8=","mode":420}`), &e))
	must.Eq(t, "a\xff", e.Path)
}
