package store

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// The object engine's answers to the engine calls that are one line each,
// and its writer leases (writers.go holds the directory engine's).

func (s *objectEngine) ping(ctx context.Context) error { return s.checkMarker(ctx) }
func (s *objectEngine) statRoot() error                { return nil }
func (s *objectEngine) classify(err error) error       { return err }
func (s *objectEngine) objects() Backend               { return s.backend }

// checkMarker fails with ErrUnavailable when the store's marker object,
// written by OpenBackend, is gone: the bucket or prefix was deleted or
// replaced under a running store. Without it a wiped bucket would look like
// a store without checkpoints, and tasks would silently start over (some
// servers even recreate a deleted bucket on the next PUT).
func (s *objectEngine) checkMarker(ctx context.Context) error {
	_, err := s.backend.Stat(ctx, objMarker)
	if errors.Is(err, ErrObjectNotFound) {
		return fmt.Errorf("%w: %s: the store's marker object %q is gone: the bucket or prefix was deleted or replaced since the store was opened",
			ErrUnavailable, s.backend, objMarker)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// fetchChunk streams the chunk from the backend: a worker's buffer is
// restoreWriteSize, not a chunk.
func (s *objectEngine) fetchChunk(ctx context.Context, f *os.File, e *FileEntry, index, chunkSize int, off int64, n int, buf *[]byte) error {
	if len(*buf) < restoreWriteSize {
		*buf = make([]byte, restoreWriteSize)
	}
	return s.streamChunk(ctx, f, e.Path, e.Chunks[index], off, n, *buf)
}
