//go:build linux

package store

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"
)

// evict drops the clean cached pages of every file below dir
// (posix_fadvise DONTNEED), after a sync(2) wrote the dirty ones.
func evict(b *testing.B, dir string) {
	b.Helper()
	syscall.Sync()
	must.NoError(b, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	}))
}
