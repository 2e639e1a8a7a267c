package store

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Chunk files (Commit) are written with O_DIRECT where the file system
// allows it: the data goes from the source map straight to the device,
// skipping the page cache. It must reach the disk before the commit point
// anyway, and nobody reads a chunk back soon. Unaligned data, and file
// systems that refuse O_DIRECT (tmpfs, some FUSE mounts), fall back to
// buffered writes, so correctness never depends on it. (Restore writes
// through the page cache: its files are read by the task next.)

// directAlign is the alignment O_DIRECT needs for offsets, lengths and
// buffers (the largest common logical block size).
const directAlign = 4096

// alignedBuf returns an n-byte slice whose first byte is directAlign-aligned.
func alignedBuf(n int) []byte {
	buf := make([]byte, n+directAlign)
	skip := (directAlign - int(uintptr(unsafe.Pointer(&buf[0]))%directAlign)) % directAlign
	return buf[skip : skip+n]
}

func isAligned(b []byte) bool {
	return len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))%directAlign == 0
}

// openDirect opens name with flag plus O_DIRECT when supported, else without;
// it reports whether O_DIRECT is on.
func openDirect(open func(flag int) (*os.File, error), flag int) (*os.File, bool, error) {
	if directFlag != 0 {
		f, err := open(flag | directFlag)
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, syscall.EINVAL) {
			return nil, false, err
		}
	}
	f, err := open(flag)
	return f, false, err
}

// writeAtAligned writes b at off in f. While direct is set (f was opened
// with O_DIRECT) and off and b are aligned, whole blocks go straight from b
// and a final partial block through bounce (directAlign bytes, aligned),
// zero-padded, but only when b ends the file (atEOF): the file may then
// extend up to the next block boundary and the caller truncates it to its
// real size. It reports whether it padded. If
// the file system refuses a direct write (EINVAL), O_DIRECT is turned off for
// f and the write is done buffered.
func writeAtAligned(f *os.File, direct *atomic.Bool, b []byte, off int64, atEOF bool, bounce []byte) (bool, error) {
	if direct.Load() && off%directAlign == 0 && isAligned(b) && (atEOF || len(b)%directAlign == 0) {
		full := len(b) &^ (directAlign - 1)
		err := func() error {
			if full > 0 {
				if _, err := f.WriteAt(b[:full], off); err != nil {
					return err
				}
			}
			if tail := len(b) - full; tail > 0 {
				copy(bounce, b[full:])
				clear(bounce[tail:directAlign])
				if _, err := f.WriteAt(bounce[:directAlign], off+int64(full)); err != nil {
					return err
				}
			}
			return nil
		}()
		if err == nil {
			return len(b) != full, nil
		}
		if !errors.Is(err, syscall.EINVAL) {
			return false, err
		}
		direct.Store(false)
		if err := clearDirect(f); err != nil {
			return false, err
		}
	}
	if direct.Load() {
		direct.Store(false)
		if err := clearDirect(f); err != nil {
			return false, err
		}
	}
	_, err := f.WriteAt(b, off)
	return false, err
}
