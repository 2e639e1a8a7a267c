package objectstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/caravan-nomad/caravan/driver/store"
)

// objectOpTimeout bounds the object store calls that take no context
// (Latest, List, Keys, Delete, DeleteGeneration, GC's pruning).
const objectOpTimeout = 2 * time.Minute

// latestPointer is the body of a key's "latest" object, overwritten after
// each commit. Listings may lag, so readers take the newest of the listing
// and the pointer, then probe forward from it.
type latestPointer struct {
	Generation uint64 `json:"generation"`
}

// objectGenerations returns the key's published generations, ascending:
// those listed, the one the latest pointer names, and any found by probing
// upwards from the newest of those (a generation published after the
// pointer was read, or whose pointer write was lost).
func (s *engine) objectGenerations(ctx context.Context, prefix string) ([]uint64, error) {
	set := map[uint64]bool{}
	err := s.backend.List(ctx, prefix, func(o store.ObjectInfo) error {
		if g, ok := store.ParseManifestName(strings.TrimPrefix(o.Name, prefix)); ok {
			set[g] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list generations: %w", err)
	}
	if p, err := s.readPointer(ctx, prefix); err != nil {
		return nil, err
	} else if p > 0 {
		if _, err := s.backend.Stat(ctx, prefix+store.ManifestName(p)); err == nil {
			set[p] = true
		} else if !errors.Is(err, store.ErrObjectNotFound) {
			return nil, fmt.Errorf("stat generation %d: %w", p, err)
		}
	}
	gens := slices.Sorted(maps.Keys(set))
	next := uint64(1)
	if len(gens) > 0 {
		next = gens[len(gens)-1] + 1
	}
	for {
		_, err := s.backend.Stat(ctx, prefix+store.ManifestName(next))
		if errors.Is(err, store.ErrObjectNotFound) {
			return gens, nil
		}
		if err != nil {
			return nil, fmt.Errorf("stat generation %d: %w", next, err)
		}
		gens = append(gens, next)
		next++
	}
}

// readPointer returns the generation the key's latest pointer names, 0
// when it has none or it does not parse.
func (s *engine) readPointer(ctx context.Context, prefix string) (uint64, error) {
	b, err := s.getSmall(ctx, prefix+objLatest)
	if errors.Is(err, store.ErrObjectNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read latest pointer: %w", err)
	}
	var p latestPointer
	if json.Unmarshal(b, &p) != nil {
		return 0, nil
	}
	return p.Generation, nil
}

// maxManifestBytes bounds what the store reads of one manifest or pointer.
const maxManifestBytes = 1 << 30

// getSmall reads a whole object (manifest, pointer, lease).
func (s *engine) getSmall(ctx context.Context, name string) ([]byte, error) {
	rc, size, err := s.backend.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if size > maxManifestBytes {
		return nil, fmt.Errorf("%w: %s has %d bytes", store.ErrCorrupt, name, size)
	}
	return io.ReadAll(io.LimitReader(rc, maxManifestBytes))
}

// readObjectManifest reads and checks one generation's manifest: a missing
// one wraps ErrObjectNotFound, one that does not parse or check ErrCorrupt.
func (s *engine) readObjectManifest(ctx context.Context, prefix string, gen uint64) (*store.Manifest, error) {
	b, err := s.getSmall(ctx, prefix+store.ManifestName(gen))
	if err != nil {
		return nil, fmt.Errorf("read manifest of generation %d: %w", gen, err)
	}
	var m store.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest of generation %d: %w", store.ErrCorrupt, gen, err)
	}
	if err := m.Check(gen); err != nil {
		return nil, fmt.Errorf("%w: manifest of generation %d: %w", store.ErrCorrupt, gen, err)
	}
	return &m, nil
}

// list is List for an object store.
func (s *engine) List(key store.Key) ([]*store.Manifest, error) {
	prefix, err := keyObjectPrefix(key)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), objectOpTimeout)
	defer cancel()
	gens, err := s.objectGenerations(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]*store.Manifest, 0, len(gens))
	for _, g := range gens {
		m, err := s.readObjectManifest(ctx, prefix, g)
		switch {
		case err == nil:
			out = append(out, m)
		case errors.Is(err, store.ErrCorrupt):
			s.logger.Warn("skipping corrupt manifest", "key", key.String(), "generation", g, "error", err)
		case errors.Is(err, store.ErrObjectNotFound):
		default:
			return nil, err
		}
	}
	return out, nil
}

// keys is Keys for an object store.
func (s *engine) Keys() ([]store.Key, error) {
	ctx, cancel := context.WithTimeout(context.Background(), objectOpTimeout)
	defer cancel()
	seen := map[string]store.Key{}
	err := s.backend.List(ctx, objKeys, func(o store.ObjectInfo) error {
		rest := strings.TrimPrefix(o.Name, objKeys)
		i := strings.LastIndexByte(rest, '/')
		if i < 0 {
			return nil
		}
		if _, ok := store.ParseManifestName(rest[i+1:]); !ok {
			return nil
		}
		if k, err := store.ParseKey(rest[:i]); err == nil {
			seen[k.String()] = k
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	keys := slices.Collect(maps.Values(seen))
	slices.SortFunc(keys, func(a, b store.Key) int { return strings.Compare(a.String(), b.String()) })
	return keys, nil
}

// deleteKey is Delete for an object store: ErrBusy while a commit or
// another deletion holds the key's lock.
func (s *engine) Delete(key store.Key) (int, error) {
	prefix, err := keyObjectPrefix(key)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), objectOpTimeout)
	defer cancel()
	gens, err := s.objectGenerations(ctx, prefix)
	if err != nil {
		return 0, err
	}
	if len(gens) == 0 {
		return 0, fmt.Errorf("%w for %s", store.ErrNoCheckpoint, key)
	}
	unlock, err := s.lockKeyObject(ctx, prefix, key, false)
	if err != nil {
		return 0, err
	}
	defer unlock()
	return s.deleteKeyLocked(ctx, prefix, key)
}

// deleteKeyLocked deletes every generation of key, oldest first, then its
// latest pointer. The caller holds the key's lock.
func (s *engine) deleteKeyLocked(ctx context.Context, prefix string, key store.Key) (int, error) {
	gens, err := s.objectGenerations(ctx, prefix) // again, under the lock
	if err != nil {
		return 0, err
	}
	n := 0
	for _, g := range gens {
		if err := s.backend.Delete(ctx, prefix+store.ManifestName(g)); err != nil {
			return n, fmt.Errorf("delete %s: %w", key, err)
		}
		n++
	}
	if err := s.backend.Delete(ctx, prefix+objLatest); err != nil {
		return n, fmt.Errorf("delete %s: %w", key, err)
	}
	s.logger.Info("checkpoint key deleted", "key", key.String(), "generations", n)
	return n, nil
}

// deleteGeneration is DeleteGeneration for an object store.
func (s *engine) DeleteGeneration(key store.Key, gen uint64) error {
	prefix, err := keyObjectPrefix(key)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), objectOpTimeout)
	defer cancel()
	gens, err := s.objectGenerations(ctx, prefix)
	if err != nil {
		return err
	}
	if !slices.Contains(gens, gen) {
		return fmt.Errorf("%w: %s has no generation %d (it has %v)", store.ErrNoCheckpoint, key, gen, gens)
	}
	unlock, err := s.lockKeyObject(ctx, prefix, key, false)
	if err != nil {
		return err
	}
	defer unlock()
	if gens, err = s.objectGenerations(ctx, prefix); err != nil {
		return err
	}
	switch {
	case !slices.Contains(gens, gen):
		return fmt.Errorf("%w: %s has no generation %d (it has %v)", store.ErrNoCheckpoint, key, gen, gens)
	case len(gens) == 1:
		_, err := s.deleteKeyLocked(ctx, prefix, key)
		return err
	}
	if err := s.backend.Delete(ctx, prefix+store.ManifestName(gen)); err != nil {
		return fmt.Errorf("delete %s generation %d: %w", key, gen, err)
	}
	s.logger.Info("checkpoint generation deleted", "key", key.String(), "generation", gen)
	return nil
}

// pruneObject deletes the manifests of gens (ascending) beyond the newest
// Retain.
func (s *engine) pruneObject(ctx context.Context, prefix string, gens []uint64) error {
	var errs []error
	if len(gens) > s.retain {
		for _, g := range gens[:len(gens)-s.retain] {
			if err := s.backend.Delete(ctx, prefix+store.ManifestName(g)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
