package store

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

const (
	dirPerm  = 0o750
	filePerm = 0o640
)

func (s *Store) chunksDir() string { return filepath.Join(s.root, ".chunks") }
func (s *Store) tmpDir() string    { return filepath.Join(s.root, ".tmp") }

// chunkPath returns the path of the chunk with hex digest d.
func (s *Store) chunkPath(d string) string {
	return filepath.Join(s.root, ".chunks", d[:2], d)
}

// syncDir fsyncs a directory so that entries created, renamed or removed in
// it are durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory for fsync: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// ensureChunkDirs creates the 256 fan-out directories of the chunk store once,
// so a commit never has to create (and fsync) a parent directory.
func (s *Store) ensureChunkDirs() error {
	if _, err := os.Stat(filepath.Join(s.chunksDir(), "ff")); err == nil {
		return nil
	}
	const hex = "0123456789abcdef"
	for i := 0; i < 256; i++ {
		d := filepath.Join(s.chunksDir(), string([]byte{hex[i>>4], hex[i&0xF]}))
		if err := os.MkdirAll(d, dirPerm); err != nil {
			return err
		}
	}
	if err := syncDir(s.chunksDir()); err != nil {
		return err
	}
	return syncDir(s.root)
}

// RandomSuffix returns 16 random hex characters for temp file names.
func RandomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
