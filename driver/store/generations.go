package store

import (
	"errors"
	"fmt"
	"io/fs"
)

// Latest returns the manifest of the key's newest generation whose manifest
// reads and checks (its chunks are not verified), or ErrNoCheckpoint.
func (s *Store) Latest(key Key) (*Manifest, error) {
	ms, err := s.List(key)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("%w for %s", ErrNoCheckpoint, key)
	}
	return ms[len(ms)-1], nil
}

// List returns the manifests of the key's generations, oldest first.
// Manifests that fail to parse or check are skipped with a warning.
func (s *Store) List(key Key) ([]*Manifest, error) {
	return s.eng.List(key)
}

// list is List in a directory store.
func (s *dirEngine) List(key Key) ([]*Manifest, error) {
	keyDir, err := key.dir(s.root)
	if err != nil {
		return nil, err
	}
	if err := s.statRoot(); err != nil {
		return nil, err
	}
	gens, err := listGenerations(keyDir)
	if err != nil {
		return nil, s.classify(err)
	}
	out := make([]*Manifest, 0, len(gens))
	for _, g := range gens {
		m, err := readManifest(keyDir, g)
		switch {
		case err == nil:
			out = append(out, m)
		case errors.Is(err, ErrCorrupt):
			s.logger.Warn("skipping corrupt manifest", "key", key.String(), "generation", g, "error", err)
		case errors.Is(err, fs.ErrNotExist):
			// Pruned between listing and reading.
		default:
			return nil, s.classify(err)
		}
	}
	return out, nil
}
