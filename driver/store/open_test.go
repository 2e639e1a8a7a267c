package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

func TestOpenUnavailable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	must.NoError(t, os.WriteFile(file, nil, 0o600))
	cases := []struct {
		name string
		root string
	}{
		{"missing", filepath.Join(t.TempDir(), "missing")},
		{"empty", ""},
		{"not a directory", file},
		{"below a file", filepath.Join(file, "sub")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(tc.root, Options{})
			must.ErrorIs(t, err, ErrUnavailable)
		})
	}
}

func TestOpenUnwritable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root can write to read-only directories")
	}
	root := t.TempDir()
	must.NoError(t, os.Chmod(root, 0o500))
	t.Cleanup(func() { _ = os.Chmod(root, 0o700) })
	_, err := Open(root, Options{})
	must.ErrorIs(t, err, ErrUnavailable)
}

func TestOpenOptions(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		ok   bool
	}{
		{"defaults", Options{}, true},
		{"negative retain", Options{Retain: -1}, false},
		{"tiny chunks", Options{ChunkSize: 100}, false},
		{"huge chunks", Options{ChunkSize: 1 << 30}, false},
		{"custom", Options{Retain: 1, ChunkSize: 64 << 10, Workers: 1}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(t.TempDir(), tc.opts)
			if !tc.ok {
				must.ErrorIs(t, err, ErrInvalid)
				return
			}
			must.NoError(t, err)
			must.Positive(t, s.retain)
			must.Positive(t, s.chunkSize)
		})
	}
}

// TestRootVanishes checks that a store whose directory disappears after Open
// (an unmounted share) reports ErrUnavailable, not "no checkpoint".
func TestRootVanishes(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "store")
	must.NoError(t, os.Mkdir(root, 0o700))
	s, err := Open(root, Options{})
	must.NoError(t, err)
	must.NoError(t, os.RemoveAll(root))
	_, err = s.Restore(t.Context(), testKey("gone"), filepath.Join(parent, "dst"))
	must.ErrorIs(t, err, ErrUnavailable)
	_, _, err = s.Commit(t.Context(), testKey("gone"), t.TempDir(), "n", nil)
	must.ErrorIs(t, err, ErrUnavailable)
	_, err = s.Latest(testKey("gone"))
	must.ErrorIs(t, err, ErrUnavailable)
}
