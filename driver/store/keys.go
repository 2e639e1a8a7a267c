package store

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Keys returns every key with at least one published generation, sorted
// by their String form. Directories that are not keys (foreign files, the
// store's own dot-directories) are skipped.
func (s *Store) Keys() ([]Key, error) {
	return s.eng.Keys()
}

// keys is Keys in a directory store.
func (s *dirEngine) Keys() ([]Key, error) {
	if err := s.statRoot(); err != nil {
		return nil, err
	}
	var keys []Key
	var walk func(dir string, rel []string) error
	walk = func(dir string, rel []string) error {
		if len(rel) == 5 {
			k, err := ParseKey(strings.Join(rel, "/"))
			if err != nil {
				return nil
			}
			gens, err := listGenerations(dir)
			if err != nil {
				return err
			}
			if len(gens) > 0 {
				keys = append(keys, k)
			}
			return nil
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
				if err := walk(filepath.Join(dir, e.Name()), append(slices.Clip(rel), e.Name())); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(s.root, nil); err != nil {
		return nil, s.classify(err)
	}
	slices.SortFunc(keys, func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
	return keys, nil
}
