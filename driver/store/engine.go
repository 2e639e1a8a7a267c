package store

import (
	"context"
	"os"
	"time"
)

// An Engine is where a Store keeps its chunks, manifests, locks and writer
// leases. There are two:
//
//   - the directory engine (dirEngine; Open): files below the store root,
//     flock for locks; its code is in the files without a prefix
//     (commit.go, restore.go, gc.go, lock.go, ...);
//   - the object engine (package objectstore; objectstore.Open): objects in
//     a Backend such as S3, leases for locks.
//
// Store's exported methods check their arguments, call the engine, and
// share what both engines do the same way: scanning and chunking a source
// tree, manifests, writing a restore's files. Neither engine is chosen by
// a check of the backend anywhere else.
type Engine interface {
	// Ping reports whether the store is reachable now (Store.Ping).
	Ping(ctx context.Context) error
	// StatRoot is the cheap availability check every operation does first.
	StatRoot() error
	// Classify wraps err with ErrUnavailable when the store has gone away.
	Classify(err error) error
	// Backend is the object store, nil for the directory engine.
	Backend() Backend

	Commit(ctx context.Context, key Key, src *os.Root, node string, meta map[string]string) (*Manifest, CommitStats, error)
	Restore(ctx context.Context, key Key, parent *os.Root, base string, start time.Time) (*RestoreResult, error)
	// FetchChunk writes chunk index of e (n bytes at off) into f; buf is
	// the worker's buffer, grown as the engine needs.
	FetchChunk(ctx context.Context, f *os.File, e *FileEntry, index, chunkSize int, off int64, n int, buf *[]byte) error
	List(key Key) ([]*Manifest, error)
	Keys() ([]Key, error)
	Delete(key Key) (int, error)
	DeleteGeneration(key Key, gen uint64) error
	GC(key Key) error
	Sweep(ctx context.Context) error

	// PutWriter, DropWriter and Writers keep the writer leases of one key
	// (writers.go), under the key's hash h.
	PutWriter(ctx context.Context, h, holder string, body []byte) error
	DropWriter(ctx context.Context, h, holder string) error
	Writers(ctx context.Context, k Key, h string) ([]WriterLease, error)
}

// dirEngine is the directory engine. It embeds its Store: the store's
// root, retention, chunk size and workers are its own.
type dirEngine struct {
	*Store
}

var _ Engine = (*dirEngine)(nil)
