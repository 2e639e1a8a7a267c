package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

// TestMappedFileShrinks checks that hashing a mapped file truncated under us
// is an error, not a crash of the process.
func TestMappedFileShrinks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	must.NoError(t, os.WriteFile(p, randomBytes(1, 1<<20), 0o600))
	f, err := os.Open(p)
	must.NoError(t, err)
	defer f.Close()
	b, m, err := mapRange(f, 0, 1<<20)
	must.NoError(t, err)
	defer unmapFile(m)
	must.NoError(t, os.Truncate(p, 0))

	errc := make(chan error, 1)
	go func() {
		GuardFaults()
		_, err := sumMapped(b)
		errc <- err
	}()
	err = <-errc
	must.Error(t, err)
	_, isFault := err.(errFault)
	must.True(t, isFault)
}

// TestCommitSourceShrinks checks a commit of a file that shrank after the
// scan fails cleanly and publishes nothing.
func TestCommitSourceShrinks(t *testing.T) {
	s := openTestStore(t, Options{})
	key := testKey("shrink")
	src := t.TempDir()
	p := filepath.Join(src, "model.bin")
	must.NoError(t, os.WriteFile(p, randomBytes(2, 8*testChunkSize), 0o600))
	root, err := os.OpenRoot(src)
	must.NoError(t, err)
	defer root.Close()
	files, err := ScanTree(root)
	must.NoError(t, err)
	must.NoError(t, os.Truncate(p, testChunkSize))
	_, err = s.storeChunks(context.Background(), root, files)
	must.Error(t, err)
	_, err = s.Latest(key)
	must.ErrorIs(t, err, ErrNoCheckpoint)
}
