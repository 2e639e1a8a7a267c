package objectstore

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/caravan-nomad/caravan/driver/store"
)

// The object engine's answers to the Engine calls that are one line each,
// and its chunk fetch (its writer leases are in writers.go).

func (s *engine) Ping(ctx context.Context) error { return s.checkMarker(ctx) }
func (s *engine) StatRoot() error                { return nil }
func (s *engine) Classify(err error) error       { return err }
func (s *engine) Backend() store.Backend         { return s.backend }

// checkMarker fails with ErrUnavailable when the store's marker object,
// written by Open, is gone: the bucket or prefix was deleted or
// replaced under a running store. Without it a wiped bucket would look like
// a store without checkpoints, and tasks would silently start over (some
// servers even recreate a deleted bucket on the next PUT).
func (s *engine) checkMarker(ctx context.Context) error {
	_, err := s.backend.Stat(ctx, objMarker)
	if errors.Is(err, store.ErrObjectNotFound) {
		return fmt.Errorf("%w: %s: the store's marker object %q is gone: the bucket or prefix was deleted or replaced since the store was opened",
			store.ErrUnavailable, s.backend, objMarker)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return nil
}

// fetchChunk streams the chunk from the backend: a worker's buffer is
// RestoreWriteSize, not a chunk.
func (s *engine) FetchChunk(ctx context.Context, f *os.File, e *store.FileEntry, index, chunkSize int, off int64, n int, buf *[]byte) error {
	if len(*buf) < store.RestoreWriteSize {
		*buf = make([]byte, store.RestoreWriteSize)
	}
	return s.streamChunk(ctx, f, e.Path, e.Chunks[index], off, n, *buf)
}
