package store

import (
	"crypto/sha256"
	"fmt"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"
)

// Commit hashes source chunks straight from read-only memory maps and writes
// them from those maps, saving one copy of every byte compared with read(2)
// into a buffer. Each chunk is mapped on its own and unmapped once handled,
// so a commit keeps at most one chunk per worker mapped, whatever the size of
// its files (a map of the whole file kept every page read resident until the
// file was done: a commit of an 8 GiB file peaked at about 7.5 GB resident).
// A mapped file that shrinks under us makes the access fault (SIGBUS);
// workers run with debug.SetPanicOnFault so that becomes an error, not a
// crash.

// mapRange maps n > 0 bytes of f from off read-only. It returns those bytes
// and the whole mapping, for unmapFile (off need not be page aligned).
func mapRange(f *os.File, off int64, n int) (b, mapping []byte, err error) {
	start := off &^ int64(os.Getpagesize()-1)
	m, err := unix.Mmap(int(f.Fd()), start, int(off-start)+n, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	_ = unix.Madvise(m, unix.MADV_SEQUENTIAL)
	return m[off-start:], m, nil
}

func unmapFile(b []byte) {
	if b != nil {
		_ = unix.Munmap(b)
	}
}

// errFault reports a memory fault reading a mapped file.
type errFault struct{ v any }

func (e errFault) Error() string {
	return fmt.Sprintf("fault reading mapped file (did it shrink?): %v", e.v)
}

// GuardFaults makes memory faults of the calling goroutine panic instead of
// crashing the process; call it at the start of a worker goroutine.
func GuardFaults() { debug.SetPanicOnFault(true) }

// sumMapped hashes b, which may be a mapping, turning a fault into an error.
// The caller's goroutine must have called GuardFaults.
func sumMapped(b []byte) (sum [sha256.Size]byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errFault{r}
		}
	}()
	return sha256.Sum256(b), nil
}
