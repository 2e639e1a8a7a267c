package objectstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/caravan-nomad/caravan/driver/store"
)

// The object engine's writer leases: writers/<hash>/<holder>.json below the
// prefix (../writers.go says what they are).

// writersOf is the key's prefix of writer leases in an object store.
func (s *engine) writersOf(h string) string { return objWriters + h + "/" }

// putWriter writes, or renews, the lease object.
func (s *engine) PutWriter(ctx context.Context, h, holder string, b []byte) error {
	if err := s.backend.Put(ctx, s.writersOf(h)+holder+".json", b, false); err != nil {
		return fmt.Errorf("writer lease: %w", err)
	}
	return nil
}

// dropWriter deletes the lease object.
func (s *engine) DropWriter(ctx context.Context, h, holder string) error {
	if err := s.backend.Delete(ctx, s.writersOf(h)+holder+".json"); err != nil {
		return fmt.Errorf("writer lease: %w", err)
	}
	return nil
}

// writers lists the key's lease objects and measures their age on the
// server's clock.
func (s *engine) Writers(ctx context.Context, k store.Key, h string) ([]store.WriterLease, error) {
	prefix := s.writersOf(h)
	var found []store.ObjectInfo
	err := s.backend.List(ctx, prefix, func(o store.ObjectInfo) error {
		rest := strings.TrimPrefix(o.Name, prefix)
		if strings.HasSuffix(rest, ".json") && !strings.Contains(rest, "/") && o.Size <= store.MaxWriterSize {
			found = append(found, o)
		}
		return nil
	})
	if err != nil || len(found) == 0 {
		return nil, err
	}
	now, err := s.serverNow(ctx)
	if err != nil {
		return nil, err
	}
	var out []store.WriterLease
	for _, o := range found {
		b, err := s.getSmall(ctx, o.Name)
		if errors.Is(err, store.ErrObjectNotFound) {
			continue // dropped since the listing
		}
		if err != nil {
			return nil, err
		}
		w, ok := store.ParseWriter(k, b)
		if !ok || prefix+w.AllocID+".json" != o.Name {
			continue
		}
		// The listing's time may be older than a renewal since: the
		// object's own is the latest.
		mod := o.Modified
		if fi, err := s.backend.Stat(ctx, o.Name); err == nil {
			mod = fi.Modified
		}
		out = append(out, store.WriterLease{Holder: w.AllocID, Node: w.Node, State: w.State, Age: max(now.Sub(mod), 0)})
	}
	return out, nil
}
