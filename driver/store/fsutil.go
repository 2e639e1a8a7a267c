package store

import "path/filepath"

const (
	dirPerm  = 0o750
	filePerm = 0o640
)

func (s *Store) chunksDir() string { return filepath.Join(s.root, ".chunks") }
func (s *Store) tmpDir() string    { return filepath.Join(s.root, ".tmp") }
