package store

import (
	"crypto/sha256"
	"fmt"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"
)

// Commit hashes source files straight from read-only memory maps and writes
// chunks from those maps, saving one copy of every byte compared with read(2)
// into a buffer. A mapped file that shrinks
// under us makes the access fault (SIGBUS); workers run with
// debug.SetPanicOnFault so that becomes an error, not a crash.

// mapFile maps the first size bytes of f read-only. size must be > 0.
func mapFile(f *os.File, size int64) ([]byte, error) {
	if int64(int(size)) != size {
		return nil, fmt.Errorf("file too large to map: %d bytes", size)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	_ = unix.Madvise(b, unix.MADV_SEQUENTIAL)
	return b, nil
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

// guardFaults makes memory faults of the calling goroutine panic instead of
// crashing the process; call it at the start of a worker goroutine.
func guardFaults() { debug.SetPanicOnFault(true) }

// sumMapped hashes b, which may be a mapping, turning a fault into an error.
// The caller's goroutine must have called guardFaults.
func sumMapped(b []byte) (sum [sha256.Size]byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errFault{r}
		}
	}()
	return sha256.Sum256(b), nil
}
