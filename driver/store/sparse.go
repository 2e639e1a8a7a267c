package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"sync"
)

// Sparse files. A chunk that lies entirely in a hole of its source file is
// n zero bytes: Commit records it by the SHA-256 of n zeros without reading
// it (SEEK_DATA says where data is, on file systems that support it), so a
// mostly-empty file costs no reads of its holes, and the manifest is exactly
// the one a read of every byte gives (same chunks, same file digest). The
// chunk itself is stored like any other (once: it is content-addressed), so
// manifests stay readable by every version.
//
// Restore creates each file at its full size (ftruncate: all holes) and
// writes only what is not zero: a chunk whose digest is the SHA-256 of its
// length in zeros is known to be zeros by that digest and is neither read
// nor written, and pieces of other chunks that are all zeros (after the
// chunk verified) are skipped. The restored file reads exactly as the
// manifest says, and keeps its holes.

// zeroDigests caches ZeroDigest by length.
var zeroDigests sync.Map // int -> string

// zeroBlock is a block of zeros for hashing and comparing.
var zeroBlock = make([]byte, 64<<10)

// ZeroDigest returns the hex SHA-256 of n zero bytes.
func ZeroDigest(n int) string {
	if d, ok := zeroDigests.Load(n); ok {
		return d.(string)
	}
	h := sha256.New()
	for left := n; left > 0; left -= min(left, len(zeroBlock)) {
		h.Write(zeroBlock[:min(left, len(zeroBlock))])
	}
	d := hex.EncodeToString(h.Sum(nil))
	zeroDigests.Store(n, d)
	return d
}

// isZero reports whether b is all zeros.
func isZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroBlock))
		if !bytes.Equal(b[:n], zeroBlock[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// zeroChunk returns a read-only chunk of zeros of at least the store's
// chunk size (aligned for O_DIRECT), allocated on first use.
func (s *Store) zeroChunk() []byte {
	s.zeroOnce.Do(func() { s.zeros = alignedBuf(s.chunkSize) })
	return s.zeros
}
