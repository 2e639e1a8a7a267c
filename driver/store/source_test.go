package store

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shoenig/test/must"
)

// TestCommitRefusesUnsafeSources checks that trees with links leaving the
// directory or special files are refused and publish nothing.
func TestCommitRefusesUnsafeSources(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"absolute symlink", func(t *testing.T, dir string) {
			must.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "pw")))
		}},
		{"symlink escaping", func(t *testing.T, dir string) {
			must.NoError(t, os.Symlink("../outside", filepath.Join(dir, "up")))
		}},
		{"nested symlink escaping", func(t *testing.T, dir string) {
			must.NoError(t, os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755))
			must.NoError(t, os.Symlink("../../../x", filepath.Join(dir, "a", "b", "l")))
		}},
		{"fifo", func(t *testing.T, dir string) {
			must.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o600))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, Options{})
			key := testKey("unsafe")
			src := t.TempDir()
			must.NoError(t, os.WriteFile(filepath.Join(src, "ok"), []byte("data"), 0o600))
			tc.setup(t, src)
			_, _, err := s.Commit(context.Background(), key, src, "n", nil)
			must.ErrorIs(t, err, ErrInvalid)
			_, err = s.Latest(key)
			must.ErrorIs(t, err, ErrNoCheckpoint)
		})
	}
}

func TestCheckRelPath(t *testing.T) {
	cases := []struct {
		p  string
		ok bool
	}{
		{"a", true}, {"a/b.c", true}, {"..a", true},
		{"", false}, {".", false}, {"..", false}, {"../a", false}, {"/abs", false},
		{"a/../b", false}, {"a//b", false}, {"a/", false}, {"./a", false}, {"a\x00b", false},
	}
	for _, tc := range cases {
		t.Run(tc.p, func(t *testing.T) {
			err := checkRelPath(tc.p)
			if tc.ok {
				must.NoError(t, err)
			} else {
				must.ErrorIs(t, err, ErrInvalid)
			}
		})
	}
}

func TestCheckLink(t *testing.T) {
	cases := []struct {
		link, target string
		ok           bool
	}{
		{"l", "model.bin", true},
		{"d/l", "../model.bin", true},
		{"d/e/l", "../f", true},
		{"l", "../x", false},
		{"d/l", "../../x", false},
		{"l", "/etc/passwd", false},
		{"l", "", false},
		{"l", "a/../../x", false},
	}
	for _, tc := range cases {
		t.Run(tc.link+"->"+tc.target, func(t *testing.T) {
			err := checkLink(tc.link, tc.target)
			if tc.ok {
				must.NoError(t, err)
			} else {
				must.ErrorIs(t, err, ErrInvalid)
			}
		})
	}
}

// TestCheckLinksResolve: links are resolved against the checkpoint root
// through the tree's own links; chains that end above the root are refused.
func TestCheckLinksResolve(t *testing.T) {
	link := func(p, target string) FileEntry {
		return FileEntry{Path: p, Mode: fs.ModeSymlink | 0o777, Link: target}
	}
	dir := func(p string) FileEntry { return FileEntry{Path: p, Mode: fs.ModeDir | 0o755} }
	cases := []struct {
		name  string
		files []FileEntry
		ok    bool
	}{
		{"plain", []FileEntry{dir("sub"), link("sub/l", "../x"), link("m", "sub/l")}, true},
		{"chain escapes", []FileEntry{dir("sub"), link("sub/u", ".."), link("v", "sub/u/..")}, false},
		{"chain escapes deeper", []FileEntry{dir("a"), dir("a/b"), link("a/b/up", "../.."), link("w", "a/b/up/../x")}, false},
		{"link to link up", []FileEntry{dir("a"), link("a/p", ".."), link("a/q", "p/..")}, false},
		{"loop", []FileEntry{link("x", "y"), link("y", "x")}, false},
		{"dangling inside", []FileEntry{link("x", "nope/../y")}, true},
		{"dangling escapes", []FileEntry{link("x", "nope/../../y")}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkLinksResolve(tc.files)
			if tc.ok {
				must.NoError(t, err)
			} else {
				must.ErrorIs(t, err, ErrInvalid)
			}
		})
	}
}

// TestCommitRefusesChainedLinks: "sub/u -> .." plus "v -> sub/u/.." each
// pass the lexical check but together point above the root.
func TestCommitRefusesChainedLinks(t *testing.T) {
	s := openTestStore(t, Options{})
	key := testKey("chain")
	src := t.TempDir()
	must.NoError(t, os.Mkdir(filepath.Join(src, "sub"), 0o755))
	must.NoError(t, os.Symlink("..", filepath.Join(src, "sub", "u")))
	must.NoError(t, os.Symlink("sub/u/..", filepath.Join(src, "v")))
	_, _, err := s.Commit(context.Background(), key, src, "n", nil)
	must.ErrorIs(t, err, ErrInvalid)
	_, err = s.Latest(key)
	must.ErrorIs(t, err, ErrNoCheckpoint)
}

// TestRestoreThroughSymlinkedDestination: a task that replaced its
// checkpoint directory with a symlink gets a directory back; the link's
// target is left exactly as it was.
func TestRestoreThroughSymlinkedDestination(t *testing.T) {
	s := openTestStore(t, Options{})
	key := testKey("dstlink")
	src := t.TempDir()
	must.NoError(t, os.WriteFile(filepath.Join(src, "model.bin"), []byte("state"), 0o600))
	_, _, err := s.Commit(context.Background(), key, src, "n", nil)
	must.NoError(t, err)

	outside := t.TempDir()
	must.NoError(t, os.WriteFile(filepath.Join(outside, "keep"), []byte("host"), 0o600))
	parent := t.TempDir()
	dst := filepath.Join(parent, "checkpoint")
	must.NoError(t, os.Symlink(outside, dst))

	_, err = s.Restore(context.Background(), key, dst)
	must.NoError(t, err)
	fi, err := os.Lstat(dst)
	must.NoError(t, err)
	must.True(t, fi.IsDir())
	b, err := os.ReadFile(filepath.Join(dst, "model.bin"))
	must.NoError(t, err)
	must.Eq(t, "state", string(b))
	ents, err := os.ReadDir(outside)
	must.NoError(t, err)
	must.SliceLen(t, 1, ents)
	must.Eq(t, "keep", ents[0].Name())
}

// TestManifestCheckRefusesChainedLinks: a stored manifest with an escaping
// chain (written by an older version, or forged in the store) is corrupt and
// never restored.
func TestManifestCheckRefusesChainedLinks(t *testing.T) {
	m := &Manifest{Format: manifestFormat, Generation: 1, ChunkSize: minChunkSize, Files: []FileEntry{
		{Path: "sub", Mode: fs.ModeDir | 0o755},
		{Path: "sub/u", Mode: fs.ModeSymlink | 0o777, Link: ".."},
		{Path: "v", Mode: fs.ModeSymlink | 0o777, Link: "sub/u/.."},
	}}
	must.ErrorIs(t, m.Check(1), ErrInvalid)
	m.Files = m.Files[:2]
	must.NoError(t, m.Check(1))
}
