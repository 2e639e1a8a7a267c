package objectstore_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/objectstore"
	"github.com/caravan-nomad/caravan/driver/store/storetest"
)

// cutOff is a backend whose chunk bodies, while cut is set, end halfway
// with io.ErrUnexpectedEOF although their announced size is right: a
// connection reset in the middle of a GET.
type cutOff struct {
	store.Backend
	cut atomic.Bool
}

func (c *cutOff) Get(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	rc, n, err := c.Backend.Get(ctx, name)
	if err != nil || !c.cut.Load() || !strings.HasPrefix(name, "chunks/") {
		return rc, n, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, n/2), errReader{}), rc}, n, nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// TestObjectRestoreCutOffDoesNotFallBack: a chunk body cut off in transit
// is a transport error, returned with the destination untouched; it must
// not make Restore fall back to an older generation (it did: the short body
// was judged a corrupt chunk).
func TestObjectRestoreCutOffDoesNotFallBack(t *testing.T) {
	b := &cutOff{Backend: storetest.NewMem()}
	s, err := objectstore.Open(b, storetest.Options())
	must.NoError(t, err)
	k := store.Key{Namespace: "default", Job: "train", Group: "g", Task: "t"}
	src := t.TempDir()
	for _, v := range []string{"one", "two"} {
		must.NoError(t, os.WriteFile(filepath.Join(src, "f"), []byte(strings.Repeat(v, 10000)), 0o644))
		_, _, err := s.Commit(context.Background(), k, src, "n", nil)
		must.NoError(t, err)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	must.NoError(t, os.Mkdir(dst, 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(dst, "mine"), []byte("x"), 0o644))

	b.cut.Store(true)
	res, err := s.Restore(context.Background(), k, dst)
	must.Error(t, err)
	must.Nil(t, res)
	must.ErrorIs(t, err, store.ErrUnavailable)
	must.False(t, errors.Is(err, store.ErrCorrupt))
	must.False(t, errors.Is(err, store.ErrNoCheckpoint))
	got, err := os.ReadFile(filepath.Join(dst, "mine"))
	must.NoError(t, err)
	must.Eq(t, "x", string(got))

	b.cut.Store(false)
	res, err = s.Restore(context.Background(), k, dst)
	must.NoError(t, err)
	must.Eq(t, uint64(2), res.Manifest.Generation)
	must.SliceEmpty(t, res.FellBack)
}
