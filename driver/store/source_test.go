package store

import (
	"context"
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
