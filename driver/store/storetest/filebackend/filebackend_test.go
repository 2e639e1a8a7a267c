package filebackend

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/storetest"
)

func newBackend(t *testing.T) *Backend {
	t.Helper()
	b, err := New(t.TempDir())
	must.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// TestPOSIXSuite runs the object store suite (the one S3 passes against a
// real server) on a directory: the Backend interface is not S3's alone.
func TestPOSIXSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend { return newBackend(t) })
}

func TestConditionalPutKeepsTheFirst(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	must.NoError(t, b.Put(ctx, "keys/a/gen-1.json", []byte("first"), true))
	must.ErrorIs(t, b.Put(ctx, "keys/a/gen-1.json", []byte("second"), true), store.ErrObjectExists)
	rc, n, err := b.Get(ctx, "keys/a/gen-1.json")
	must.NoError(t, err)
	got, err := io.ReadAll(rc)
	must.NoError(t, err)
	must.NoError(t, rc.Close())
	must.Eq(t, int64(5), n)
	must.Eq(t, "first", string(got))
	// No temp file is left beside it, and a plain Put replaces it.
	must.NoError(t, b.Put(ctx, "keys/a/gen-1.json", []byte("third"), false))
	names, err := os.ReadDir(filepath.Join(b.dir, "keys", "a"))
	must.NoError(t, err)
	must.SliceLen(t, 1, names)
}

func TestListAndMissing(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	for _, n := range []string{"leases/commit-1", "leases/commit-2", "leases/gc", "chunks/ab/abc", "caravan-store.json"} {
		must.NoError(t, b.Put(ctx, n, []byte(n), false))
	}
	list := func(prefix string) []string {
		var got []string
		must.NoError(t, b.List(ctx, prefix, func(o store.ObjectInfo) error {
			got = append(got, o.Name)
			return nil
		}))
		return got
	}
	must.Eq(t, []string{"leases/commit-1", "leases/commit-2"}, list("leases/commit-"))
	must.Eq(t, []string{"chunks/ab/abc"}, list("chunks/"))
	must.SliceEmpty(t, list("keys/"))
	_, err := b.Stat(ctx, "chunks/ab/missing")
	must.ErrorIs(t, err, store.ErrObjectNotFound)
	_, _, err = b.Get(ctx, "chunks/ab")
	must.ErrorIs(t, err, store.ErrObjectNotFound)
	must.NoError(t, b.Delete(ctx, "chunks/ab/missing"))
}

func TestNamesStayInside(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	for _, n := range []string{"", "/etc/passwd", "../x", "a/../../x", "a/.tmp-x", "a//b"} {
		must.ErrorIs(t, b.Put(ctx, n, nil, false), store.ErrInvalid, must.Sprint(n))
	}
}
