package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// DeleteGeneration removes one generation of key: its manifest only (its
// chunks are left for GC). The generations before it stay, and the newest
// of them is what restores and orders the key's next commits from then on.
// It is how an operator drops a generation that should not be the newest,
// such as one whose step holds every later commit back as stale. Deleting
// the key's only generation deletes the key, as Delete does.
//
// It refuses, deleting nothing, a generation the key does not have
// (ErrNoCheckpoint) and a key whose lock is held (ErrBusy).
func (s *Store) DeleteGeneration(key Key, gen uint64) error {
	return s.eng.DeleteGeneration(key, gen)
}

// deleteGeneration is DeleteGeneration in a directory store.
func (s *dirEngine) DeleteGeneration(key Key, gen uint64) error {
	keyDir, err := key.dir(s.root)
	if err != nil {
		return err
	}
	if err := s.statRoot(); err != nil {
		return err
	}
	gens, err := listGenerations(keyDir)
	if err != nil {
		return s.classify(err)
	}
	if !slices.Contains(gens, gen) {
		return fmt.Errorf("%w: %s has no generation %d (it has %v)", ErrNoCheckpoint, key, gen, gens)
	}
	unlock, err := tryLockKey(keyDir)
	if err != nil {
		return s.classify(err)
	}
	defer unlock()
	if gens, err = listGenerations(keyDir); err != nil {
		return s.classify(err)
	}
	switch {
	case !slices.Contains(gens, gen): // retention pruned it meanwhile
		return fmt.Errorf("%w: %s has no generation %d (it has %v)", ErrNoCheckpoint, key, gen, gens)
	case len(gens) == 1:
		if _, err := removeKeyDir(keyDir, gens); err != nil {
			return s.classify(fmt.Errorf("delete %s: %w", key, err))
		}
		removeEmptyParents(s.root, filepath.Dir(keyDir))
	default:
		err := os.Remove(filepath.Join(keyDir, ManifestName(gen)))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return s.classify(fmt.Errorf("delete %s generation %d: %w", key, gen, err))
		}
		if err := syncDir(keyDir); err != nil {
			return s.classify(err)
		}
	}
	s.logger.Info("checkpoint generation deleted", "key", key.String(), "generation", gen)
	return nil
}
