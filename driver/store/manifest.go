package store

import (
	"io/fs"
	"time"
)

// manifestFormat is the on-disk manifest format version.
const manifestFormat = 1

// Manifest describes one published checkpoint generation of one key.
type Manifest struct {
	// Format is the manifest format version (1).
	Format     int               `json:"format"`
	Key        string            `json:"key"`
	Generation uint64            `json:"generation"`
	Created    time.Time         `json:"created"`
	Node       string            `json:"node"`
	Meta       map[string]string `json:"meta,omitempty"`
	ChunkSize  int               `json:"chunk_size"`
	Files      []FileEntry       `json:"files"`
	TotalBytes int64             `json:"total_bytes"`
}

// FileEntry is one directory, regular file or symlink of a checkpoint, with
// a slash-separated Path relative to the checkpoint directory.
type FileEntry struct {
	Path string      `json:"path"`
	Mode fs.FileMode `json:"mode"`
	Size int64       `json:"size"`
	// SHA256 is the hex SHA-256 of the file's contents (empty for directories
	// and symlinks).
	SHA256 string `json:"sha256,omitempty"`
	// Chunks are the hex SHA-256 digests of the file's fixed-size chunks, in
	// order; each names a chunk file in the store.
	Chunks []string `json:"chunks,omitempty"`
	// ModTime is the file's modification time, restored on Restore.
	ModTime time.Time `json:"mod_time"`
	// Link is the target of a symlink (relative, inside the checkpoint).
	Link string `json:"link,omitempty"`
}

// CommitStats summarises one Commit.
type CommitStats struct {
	Generation uint64
	Files      int
	Bytes      int64
	// NewBytes counts chunk bytes actually written (chunks not already in
	// the store).
	NewBytes int64
	Duration time.Duration
}

// RestoreResult summarises one Restore.
type RestoreResult struct {
	// Manifest is the generation restored.
	Manifest *Manifest
	// FellBack lists newer generations skipped because they failed
	// verification, newest first.
	FellBack []uint64
	Duration time.Duration
}
