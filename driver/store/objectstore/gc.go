package objectstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/caravan-nomad/caravan/driver/store"
)

// gc is GC for an object store: prune the key, then sweep.
func (s *engine) GC(key store.Key) error {
	prefix, err := keyObjectPrefix(key)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), objectOpTimeout)
	gens, err := s.objectGenerations(ctx, prefix)
	if err == nil {
		err = s.pruneObject(ctx, prefix, gens)
	}
	cancel()
	if err != nil {
		return err
	}
	ctx, cancel = context.WithTimeout(context.Background(), 4*objectOpTimeout)
	defer cancel()
	return s.Sweep(ctx)
}

// sweepAll deletes the chunks no manifest of any key references, once
// they are older than the grace period, and aborts multipart uploads that
// old. It holds GC's lease throughout, taken only once no commit or restore
// lease is live (see acquireGCLease), so a chunk a commit found present,
// and did not upload, cannot go before that commit's manifest names it.
// If any manifest cannot be read, nothing is deleted.
func (s *engine) Sweep(ctx context.Context) error {
	l, now, err := s.acquireGCLease(ctx)
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	defer s.release(l)
	refs, err := s.objectRefs(ctx)
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	cutoff := now.Add(-s.gcGrace)
	if s.gcGrace < 0 {
		cutoff = now.Add(time.Hour) // any age
	}
	var doomed []string
	kept, young := 0, 0
	err = s.backend.List(ctx, objChunks, func(o store.ObjectInfo) error {
		d := o.Name[strings.LastIndexByte(o.Name, '/')+1:]
		switch {
		case refs[d]:
			kept++
		case !o.Modified.Before(cutoff):
			young++
		default:
			doomed = append(doomed, o.Name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("gc: list chunks: %w", err)
	}
	var errs []error
	deleted := 0
	for _, name := range doomed {
		if l.lost.Load() {
			// Another client took GC's lease over (this one paused past
			// LeaseTTL): commits may be running; delete nothing more.
			errs = append(errs, fmt.Errorf("%w: gc's lease was taken over; sweep stopped", errLeaseLost))
			break
		}
		if err := s.backend.Delete(ctx, name); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted++
	}
	aborted := 0
	if c, ok := s.backend.(store.UploadCleaner); ok {
		n, err := c.AbortStaleUploads(ctx, cutoff)
		if err != nil {
			errs = append(errs, fmt.Errorf("abort stale uploads: %w", err))
		}
		aborted = n
	}
	s.logger.Info("gc swept", "chunks_deleted", deleted, "chunks_kept", kept, "chunks_in_grace", young,
		"uploads_aborted", aborted)
	if len(errs) > 0 {
		return fmt.Errorf("gc: %w", errors.Join(errs...))
	}
	return nil
}

// objectRefs reads every manifest of every key and returns the chunks they
// name. Manifests that do not parse cannot be restored and are skipped with
// a warning; read errors abort.
func (s *engine) objectRefs(ctx context.Context) (map[string]bool, error) {
	var names []string
	err := s.backend.List(ctx, objKeys, func(o store.ObjectInfo) error {
		if _, ok := store.ParseManifestName(o.Name[strings.LastIndexByte(o.Name, '/')+1:]); ok {
			names = append(names, o.Name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list manifests: %w", err)
	}
	refs := map[string]bool{}
	for _, name := range names {
		b, err := s.getSmall(ctx, name)
		if errors.Is(err, store.ErrObjectNotFound) {
			continue // pruned meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		var m store.Manifest
		if err := json.Unmarshal(b, &m); err != nil {
			s.logger.Warn("gc: skipping unreadable manifest", "object", name, "error", err)
			continue
		}
		for _, f := range m.Files {
			for _, c := range f.Chunks {
				refs[c] = true
			}
		}
	}
	return refs, nil
}

// touchBefore is the server time before which a chunk a commit reuses was
// last written long enough ago to need touching: half the grace period
// before the commit's lease was written (zero, touching nothing, when GC
// ignores age). GC deletes an unreferenced chunk only once it is older
// than the grace period, so a chunk a manifest names is safe from a GC
// that does not see that manifest in its listing for as long as the commit
// plus the listing's lag stays under half the grace period.
func (s *engine) touchBefore(leaseAt time.Time) time.Time {
	if s.gcGrace <= 0 || leaseAt.IsZero() {
		return time.Time{}
	}
	return leaseAt.Add(-s.gcGrace / 2)
}

// touchChunk brings the modification time of the chunk name, which a
// commit reuses, to the server's present: with the backend's Toucher (a
// server-side copy onto itself), else by uploading b again. It returns the
// bytes uploaded.
func (s *engine) touchChunk(ctx context.Context, name string, b []byte) (int64, error) {
	if s.toucher != nil {
		err := s.toucher.Touch(ctx, name)
		if err == nil {
			return 0, nil
		}
		if !errors.Is(err, store.ErrObjectNotFound) {
			return 0, fmt.Errorf("touch chunk: %w", err)
		}
	}
	if err := s.backend.Put(ctx, name, b, false); err != nil {
		return 0, fmt.Errorf("upload chunk: %w", err)
	}
	return int64(len(b)), nil
}
