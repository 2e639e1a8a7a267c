package store

import (
	"context"
	"errors"
)

// Restore replaces the contents of dstDir with the newest generation of key
// whose every chunk verifies, falling back to older generations on
// corruption. It returns ErrNoCheckpoint when the key has no checkpoint.
func (s *Store) Restore(ctx context.Context, key Key, dstDir string) (*RestoreResult, error) {
	return nil, errors.New("store: restore not implemented yet")
}

// Latest returns the manifest of the key's newest generation (without
// verifying its chunks), or ErrNoCheckpoint.
func (s *Store) Latest(key Key) (*Manifest, error) {
	return nil, ErrNoCheckpoint
}

// List returns the manifests of the key's generations, oldest first.
func (s *Store) List(key Key) ([]*Manifest, error) {
	return nil, nil
}
