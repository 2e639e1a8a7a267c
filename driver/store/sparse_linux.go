package store

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// inHole reports whether the n bytes of f from off are all in a hole, by
// SEEK_DATA: false where the file system cannot tell (it then reads as
// data).
func inHole(f *os.File, off int64, n int) bool {
	next, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	if errors.Is(err, unix.ENXIO) {
		return true // no data at or after off
	}
	return err == nil && next >= off+int64(n)
}
