package store

import (
	"context"
	"os"
	"time"
)

// An engine is where a Store keeps its chunks, manifests, locks and writer
// leases. There are two:
//
//   - the directory engine (dirEngine; Open): files below the store root,
//     flock for locks; its code is in the files without a prefix
//     (commit.go, restore.go, gc.go, lock.go, ...);
//   - the object engine (objectEngine; OpenBackend): objects in a Backend
//     such as S3, leases for locks; its code is in object_*.go.
//
// Store's exported methods check their arguments, call the engine, and
// share what both engines do the same way: scanning and chunking a source
// tree, manifests, writing a restore's files. Neither engine is chosen by
// a check of the backend anywhere else.
type engine interface {
	// ping reports whether the store is reachable now (Ping).
	ping(ctx context.Context) error
	// statRoot is the cheap availability check every operation does first.
	statRoot() error
	// classify wraps err with ErrUnavailable when the store has gone away.
	classify(err error) error
	// objects is the object store, nil for the directory engine.
	objects() Backend

	commit(ctx context.Context, key Key, src *os.Root, node string, meta map[string]string) (*Manifest, CommitStats, error)
	restore(ctx context.Context, key Key, parent *os.Root, base string, start time.Time) (*RestoreResult, error)
	// fetchChunk writes chunk index of e (n bytes at off) into f; buf is
	// the worker's buffer, grown as the engine needs.
	fetchChunk(ctx context.Context, f *os.File, e *FileEntry, index, chunkSize int, off int64, n int, buf *[]byte) error
	list(key Key) ([]*Manifest, error)
	keys() ([]Key, error)
	deleteKey(key Key) (int, error)
	deleteGeneration(key Key, gen uint64) error
	gc(key Key) error
	sweepAll(ctx context.Context) error

	// putWriter, dropWriter and writers keep the writer leases of one key
	// (writers.go), under the key's hash h.
	putWriter(ctx context.Context, h, holder string, body []byte) error
	dropWriter(ctx context.Context, h, holder string) error
	writers(ctx context.Context, k Key, h string) ([]WriterLease, error)
}

// dirEngine is the directory engine. It embeds its Store: the store's
// root, retention, chunk size and workers are its own.
type dirEngine struct {
	*Store
}

// objectEngine is the object engine: the Store's chunks, manifests and
// leases are objects in backend (README.md, "Object stores"). It embeds its
// Store as dirEngine does.
type objectEngine struct {
	*Store
	backend   Backend
	swapper   Swapper       // backend's compare-and-swap, nil when it has none
	toucher   Toucher       // backend's touch, nil when it has none
	leaseTTL  time.Duration // how long a lease lives unrefreshed
	gcGrace   time.Duration // how old an unreferenced chunk must be to go
	settle    time.Duration // how long GC waits for listings to settle
	pollEvery time.Duration // how often a waiter looks again
}

var (
	_ engine = (*dirEngine)(nil)
	_ engine = (*objectEngine)(nil)
)
