package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrBusy is returned by Delete when a commit, retention or another
// deletion holds the key's lock.
var ErrBusy = errors.New("checkpoint key in use")

// Delete removes every generation of key: its manifests, oldest first (so a
// restore racing with it sees the newest generation or none, never an older
// one), then the key's directory and the parents it leaves empty. Chunks
// are left for GC. It returns the number of generations removed.
//
// It refuses, deleting nothing, a key with no generation (ErrNoCheckpoint)
// and a key whose lock is held (ErrBusy): it never waits for a commit.
func (s *Store) Delete(key Key) (int, error) {
	return s.eng.Delete(key)
}

// deleteKey is Delete in a directory store.
func (s *dirEngine) Delete(key Key) (int, error) {
	keyDir, err := key.dir(s.root)
	if err != nil {
		return 0, err
	}
	if err := s.statRoot(); err != nil {
		return 0, err
	}
	gens, err := listGenerations(keyDir)
	if err != nil {
		return 0, s.classify(err)
	}
	if len(gens) == 0 {
		return 0, fmt.Errorf("%w for %s", ErrNoCheckpoint, key)
	}
	unlock, err := tryLockKey(keyDir)
	if err != nil {
		return 0, s.classify(err)
	}
	defer unlock()
	// Re-list under the lock: a commit may have finished in between.
	if gens, err = listGenerations(keyDir); err != nil {
		return 0, s.classify(err)
	}
	n, err := removeKeyDir(keyDir, gens)
	if err != nil {
		return n, s.classify(fmt.Errorf("delete %s: %w", key, err))
	}
	removeEmptyParents(s.root, filepath.Dir(keyDir))
	s.logger.Info("checkpoint key deleted", "key", key.String(), "generations", n)
	return n, nil
}

// removeKeyDir deletes gens' manifests oldest first, then everything else
// in keyDir (lock file last) and keyDir itself. The caller holds the lock:
// a committer waiting on the removed lock file notices and retries on a new
// one (lockKey).
func removeKeyDir(keyDir string, gens []uint64) (int, error) {
	n := 0
	for _, g := range gens {
		if err := os.Remove(filepath.Join(keyDir, ManifestName(g))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, err
		}
		n++
	}
	if err := syncDir(keyDir); err != nil {
		return n, err
	}
	ents, err := os.ReadDir(keyDir)
	if err != nil {
		return n, err
	}
	for _, e := range ents {
		if e.Name() == "lock" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(keyDir, e.Name())); err != nil {
			return n, err
		}
	}
	if err := os.Remove(filepath.Join(keyDir, "lock")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return n, err
	}
	if err := os.Remove(keyDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return n, err
	}
	return n, syncDir(filepath.Dir(keyDir))
}

// removeEmptyParents removes dir and its parents up to (excluding) root
// while they are empty. A directory a concurrent commit just created is not
// empty, or is recreated by its lockKey.
func removeEmptyParents(root, dir string) {
	for dir != root && strings.HasPrefix(dir, root+string(filepath.Separator)) {
		if err := os.Remove(dir); err != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}
