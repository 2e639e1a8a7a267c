//go:build linux

package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing the dirty pages of f in
// [off, off+n) now, without waiting for them (n == 0: to the end), so the
// fsync that follows finds little left to do and the disk works while we
// hash.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// fdatasync makes f's data (and the metadata needed to read it) durable.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// dropCached drops f's clean pages from the page cache.
func dropCached(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) }
