package objectstore_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/driver/store/objectstore"
	"github.com/caravan-nomad/caravan/driver/store/storetest"
)

// TestObjectStoreSparseFile commits a 256 MiB sparse file to the object
// store (the in-memory backend) and restores it: the chunks and the file
// digest are those of the directory store, and the restored file keeps its
// holes (it used to be written out in full).
func TestObjectStoreSparseFile(t *testing.T) {
	const size = 256 << 20
	src := t.TempDir()
	p := filepath.Join(src, "sparse.bin")
	data := bytes.Repeat([]byte("caravan!"), 1024)
	f, err := os.Create(p)
	must.NoError(t, err)
	must.NoError(t, f.Truncate(size))
	for _, off := range []int64{0, size / 2, size - int64(len(data))} {
		_, err := f.WriteAt(data, off)
		must.NoError(t, err)
	}
	must.NoError(t, f.Close())
	if blocks(t, p) > size/4 {
		t.Skipf("the file system of %s does not keep holes", p)
	}
	ctx := context.Background()
	key := store.Key{Namespace: "default", Job: "sparse", Group: "g", Task: "t"}

	obj, err := objectstore.Open(storetest.NewMem(), store.Options{})
	must.NoError(t, err)
	mo, _, err := obj.Commit(ctx, key, src, "n1", nil)
	must.NoError(t, err)
	dir, err := store.Open(t.TempDir(), store.Options{})
	must.NoError(t, err)
	md, _, err := dir.Commit(ctx, key, src, "n1", nil)
	must.NoError(t, err)
	must.Eq(t, md.Files[0].Chunks, mo.Files[0].Chunks)
	must.Eq(t, md.Files[0].SHA256, mo.Files[0].SHA256)

	dst := filepath.Join(t.TempDir(), "ckpt")
	_, err = obj.Restore(ctx, key, dst)
	must.NoError(t, err)
	got := filepath.Join(dst, "sparse.bin")
	must.LessEq(t, int64(4<<20), blocks(t, got), must.Sprint("the restored file's holes were written out"))
	want, err := os.ReadFile(p)
	must.NoError(t, err)
	have, err := os.ReadFile(got)
	must.NoError(t, err)
	must.True(t, bytes.Equal(want, have), must.Sprint("restored contents differ"))
}

// blocks returns the bytes of disk a file uses (st_blocks).
func blocks(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	must.NoError(t, syscall.Stat(path, &st))
	return st.Blocks * 512
}
