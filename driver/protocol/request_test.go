package protocol

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

// TestReadRequest: the request file round-trips; a symlink, FIFO or
// oversized request is refused unread, and RequestSequence reads those
// (and no file) as 0.
func TestReadRequest(t *testing.T) {
	dir := t.TempDir()
	must.Eq(t, uint64(0), RequestSequence(dir))
	_, err := ReadRequest(dir)
	must.True(t, IsNoRequest(err))
	must.NoError(t, WriteRequest(dir, &Request{Sequence: 3}))
	must.Eq(t, uint64(3), RequestSequence(dir))

	secret := filepath.Join(t.TempDir(), "secret")
	must.NoError(t, os.WriteFile(secret, []byte(`{"sequence": 99}`), 0o600))
	cases := map[string]func(p string) error{
		"symlink": func(p string) error { return os.Symlink(secret, p) },
		"huge":    func(p string) error { return os.WriteFile(p, make([]byte, maxRequestSize+1), 0o644) },
		"garbage": func(p string) error { return os.WriteFile(p, []byte("{"), 0o644) },
	}
	for name, plant := range cases {
		t.Run(name, func(t *testing.T) {
			d := t.TempDir()
			must.NoError(t, plant(filepath.Join(d, RequestName)))
			_, err := ReadRequest(d)
			must.Error(t, err)
			must.Eq(t, uint64(0), RequestSequence(d))
		})
	}
}
