package objectstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/caravan-nomad/caravan/driver/store"
)

// restore is RestoreRoot for an object store, under a restore lease
// (so GC waits for it). Each chunk is read into a worker's buffer and
// verified before it is written; a missing or bad chunk makes the
// generation ErrCorrupt and the next older one is tried.
func (s *engine) Restore(ctx context.Context, key store.Key, parent *os.Root, base string, start time.Time) (*store.RestoreResult, error) {
	prefix, err := keyObjectPrefix(key)
	if err != nil {
		return nil, err
	}
	owner := store.DirOwner(parent, base)
	if err := s.checkMarker(ctx); err != nil {
		return nil, err
	}
	l, err := s.acquireLease(ctx, "restore", key)
	if err != nil {
		return nil, err
	}
	defer s.release(l)
	gens, err := s.objectGenerations(ctx, prefix)
	if err != nil {
		return nil, err
	}
	if len(gens) == 0 {
		return nil, fmt.Errorf("%w for %s", store.ErrNoCheckpoint, key)
	}
	store.RemoveStale(parent, base)
	res := &store.RestoreResult{}
	var lastErr error
	for _, gen := range slices.Backward(gens) {
		m, err := s.readObjectManifest(ctx, prefix, gen)
		if err == nil {
			err = s.st.RestoreGeneration(ctx, m, parent, base, owner)
		}
		if err == nil {
			res.Manifest = m
			res.Duration = time.Now().Sub(start)
			s.logger.Info("checkpoint restored", "key", m.Key, "generation", gen, "from_node", m.Node,
				"bytes", m.TotalBytes, "fell_back", res.FellBack, "duration", res.Duration)
			return res, nil
		}
		if errors.Is(err, store.ErrObjectNotFound) && m == nil {
			continue // pruned by a concurrent commit
		}
		if !errors.Is(err, store.ErrCorrupt) {
			return nil, err
		}
		s.logger.Warn("checkpoint generation failed verification, falling back", "key", key.String(),
			"generation", gen, "error", err)
		res.FellBack = append(res.FellBack, gen)
		lastErr = err
	}
	return nil, fmt.Errorf("%w for %s: all %d generations failed verification, newest error: %w",
		store.ErrNoCheckpoint, key, len(gens), lastErr)
}

// streamChunk copies chunk d, of n bytes, from the backend to f at off as
// it arrives, RestoreWriteSize bytes at a time through buf, hashing each
// piece while it is in the CPU's cache, and verifies the whole at the end.
// Unverified bytes land only in the restore's temp sibling, which is
// discarded unless every chunk verifies. A missing chunk, one of the wrong
// size or one that fails its SHA-256 is ErrCorrupt; a bad one is deleted,
// so the next commit uploads it afresh (a HEAD would otherwise find it and
// keep referencing the bad copy).
func (s *engine) streamChunk(ctx context.Context, f *os.File, path, d string, off int64, n int, buf []byte) error {
	name := chunkObject(d)
	rc, size, err := s.backend.Get(ctx, name)
	if errors.Is(err, store.ErrObjectNotFound) {
		return fmt.Errorf("%w: %s: chunk %s is missing", store.ErrCorrupt, path, d)
	}
	if err != nil {
		return fmt.Errorf("read chunk %s: %w", d, err)
	}
	defer rc.Close()
	if size >= 0 && size != int64(n) {
		s.dropCorrupt(ctx, d)
		return fmt.Errorf("%w: %s: chunk %s has %d bytes, want %d", store.ErrCorrupt, path, d, size, n)
	}
	h := sha256.New()
	for left := n; left > 0; {
		b := buf[:min(left, len(buf))]
		if _, err := io.ReadFull(rc, b); err != nil {
			// An object whose announced size is right but whose body ends
			// early was cut off in transit (a connection reset): the
			// generation is not to blame, so no fallback.
			if size < 0 && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)) {
				return fmt.Errorf("%w: %s: chunk %s is short: %w", store.ErrCorrupt, path, d, err)
			}
			if ctx.Err() != nil {
				return fmt.Errorf("read chunk %s: %w", d, context.Cause(ctx))
			}
			return fmt.Errorf("%w: read chunk %s: %w", store.ErrUnavailable, d, err)
		}
		h.Write(b)
		if err := store.WriteChunkAt(f, path, b, off); err != nil {
			return err
		}
		off += int64(len(b))
		left -= len(b)
	}
	if hex.EncodeToString(h.Sum(nil)) != d {
		s.dropCorrupt(ctx, d)
		return fmt.Errorf("%w: %s: chunk %s fails its SHA-256", store.ErrCorrupt, path, d)
	}
	return nil
}

// dropCorrupt deletes a chunk object that failed verification.
func (s *engine) dropCorrupt(ctx context.Context, d string) {
	if err := s.backend.Delete(context.WithoutCancel(ctx), chunkObject(d)); err == nil {
		s.logger.Warn("deleted corrupt chunk", "chunk", d)
	}
}
