package store

import (
	"context"
	"errors"
)

// Commit stores the contents of srcDir as the key's next generation and
// returns its manifest. It is atomic: until the manifest is renamed into
// place no reader sees the new generation, and a crash at any point leaves
// the previous generations intact.
func (s *Store) Commit(ctx context.Context, key Key, srcDir string, node string, meta map[string]string) (*Manifest, CommitStats, error) {
	return nil, CommitStats{}, errors.New("store: commit not implemented yet")
}
