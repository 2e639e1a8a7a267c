// Package store is caravan's checkpoint store: content-addressed, crash-safe
// checkpoint generations kept in a directory every Nomad client can reach
// (local disk for one node, NFS or any shared mount for many).
//
// It has no Nomad dependencies. See README.md for the on-disk layout and the
// crash-safety argument.
package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
)

const (
	// DefaultRetain is the number of generations kept per key when
	// Options.Retain is zero.
	DefaultRetain = 3

	// DefaultChunkSize is the chunk size used when Options.ChunkSize is zero.
	DefaultChunkSize = 4 << 20

	// minChunkSize and maxChunkSize bound Options.ChunkSize.
	minChunkSize = 4 << 10
	maxChunkSize = 256 << 20
)

var (
	// ErrNoCheckpoint is returned when a key has no checkpoint, or (wrapped
	// together with ErrCorrupt) when every generation failed verification.
	ErrNoCheckpoint = errors.New("no checkpoint")

	// ErrUnavailable is returned when the store root is missing, not a
	// directory or not writable.
	ErrUnavailable = errors.New("checkpoint store unavailable")

	// ErrCorrupt is returned when a manifest or chunk fails verification.
	ErrCorrupt = errors.New("checkpoint corrupt")

	// ErrRestoreDest is returned by Restore when writing the destination
	// fails (no space, too many open files, an I/O error of the local file
	// system). The stored generation is intact, so Restore does not fall
	// back to an older one for it; a later restore (on this node once the
	// cause is gone, or on another) restores the same generation.
	ErrRestoreDest = errors.New("restore destination failed")

	// ErrInvalid is returned for bad keys, bad options and source trees the
	// store refuses (paths escaping the directory, special files).
	ErrInvalid = errors.New("invalid checkpoint input")
)

// Options configures a Store.
type Options struct {
	// Retain is the number of generations kept per key (default 3).
	Retain int
	// ChunkSize is the fixed chunk size in bytes (default 4 MiB).
	ChunkSize int
	// Logger receives the store's logs; a null logger when nil.
	Logger hclog.Logger
	// LeaseTTL, GCGrace and Settle tune an object store (objectstore.Open; see
	// README.md, "Object stores"): how long a commit's, restore's or GC's
	// lease lives without being refreshed (default 30 s), how old an
	// unreferenced chunk must be before GC deletes it (default 15 min;
	// negative: any age), and how long GC waits after announcing itself
	// before it lists the leases (default 2 s; negative: not at all).
	LeaseTTL, GCGrace, Settle time.Duration
	// Workers is the number of goroutines hashing and copying chunks
	// (default 4*GOMAXPROCS within [4, 16]: chunk I/O is synchronous
	// O_DIRECT, so several workers per core keep the disk queue full while
	// others hash). Restore runs twice as many, up to 16 (or Workers if
	// larger), each holding one chunk-sized buffer.
	Workers int
}

// Store is a checkpoint store rooted at one directory. It is safe for
// concurrent use by many goroutines and many processes (on many hosts when
// the root is on a shared file system with working flock).
type Store struct {
	root      string
	retain    int
	chunkSize int
	workers   int
	logger    hclog.Logger
	now       func() time.Time

	// eng keeps the chunks, manifests, locks and writer leases: a
	// *dirEngine (Open) or the object engine (objectstore.Open).
	eng Engine

	zeroOnce sync.Once
	zeros    []byte // zeroChunk
}

// Open opens the store rooted at root, which must exist and be writable.
// The store's internal directories are created when missing.
func Open(root string, opts Options) (*Store, error) {
	if root == "" {
		return nil, fmt.Errorf("%w: empty root path", ErrUnavailable)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	s, err := newStore(opts)
	if err != nil {
		return nil, err
	}
	s.root = abs
	s.eng = &dirEngine{Store: s}
	if err := s.checkRoot(); err != nil {
		return nil, err
	}
	for _, d := range []string{s.chunksDir(), s.tmpDir()} {
		if err := os.MkdirAll(d, dirPerm); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	if err := s.ensureChunkDirs(); err != nil {
		return nil, fmt.Errorf("%w: create chunk directories: %w", ErrUnavailable, err)
	}
	return s, nil
}

// New returns a store whose chunks, manifests, locks and writer leases are
// kept by the engine newEngine builds for it; root names the store (Root).
// An engine package calls it from its Open (objectstore.Open).
func New(root string, opts Options, newEngine func(*Store) Engine) (*Store, error) {
	s, err := newStore(opts)
	if err != nil {
		return nil, err
	}
	s.root = root
	s.eng = newEngine(s)
	return s, nil
}

// Logger returns the store's logger, for its engine.
func (s *Store) Logger() hclog.Logger { return s.logger }

// Retain returns the number of generations kept per key.
func (s *Store) Retain() int { return s.retain }

// ChunkSize returns the chunk size of new commits.
func (s *Store) ChunkSize() int { return s.chunkSize }

// Workers returns the number of goroutines that hash, copy and fetch chunks.
func (s *Store) Workers() int { return s.workers }

// Root returns the absolute path of the store root.
func (s *Store) Root() string { return s.root }

// checkRoot verifies the root exists, is a directory and is writable.
func (s *Store) checkRoot() error {
	fi, err := os.Stat(s.root)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrUnavailable, s.root)
	}
	f, err := os.CreateTemp(s.root, ".probe-*")
	if err != nil {
		return fmt.Errorf("%w: root not writable: %w", ErrUnavailable, err)
	}
	name := f.Name()
	_ = f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("%w: root not writable: %w", ErrUnavailable, err)
	}
	return nil
}

// Ping reports whether the store is reachable now: the root directory of a
// directory store, the marker object of an object store (ErrUnavailable
// when not).
func (s *Store) Ping(ctx context.Context) error { return s.eng.Ping(ctx) }

// Backend returns the object store backend, nil for a directory store.
func (s *Store) Backend() Backend { return s.eng.Backend() }

// statRoot is the cheap availability check done by every operation.
func (s *Store) statRoot() error { return s.eng.StatRoot() }

// classify wraps err with ErrUnavailable when the store has gone away (the
// engine's classify).
func (s *Store) classify(err error) error { return s.eng.Classify(err) }

func (s *dirEngine) Ping(context.Context) error { return s.statRoot() }
func (s *dirEngine) Backend() Backend           { return nil }

// statRoot checks the root directory is still there.
func (s *dirEngine) StatRoot() error {
	fi, err := os.Stat(s.root)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrUnavailable, s.root)
	}
	return nil
}

// classify wraps err with ErrUnavailable when the store root has gone away
// (an unmounted share, a deleted directory), so callers can tell an
// unreachable store from other failures, and says "no free inodes" for an
// ENOSPC that is one (explainNoSpace).
func (s *dirEngine) Classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	if !errors.Is(err, ErrRestoreDest) { // the destination is not the store
		err = explainNoSpace(err, s.root)
	}
	if rerr := s.statRoot(); rerr != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// newStore applies the defaults of opts common to both kinds of store.
func newStore(opts Options) (*Store, error) {
	if opts.Retain < 0 {
		return nil, fmt.Errorf("%w: retain must be >= 1, got %d", ErrInvalid, opts.Retain)
	}
	if opts.Retain == 0 {
		opts.Retain = DefaultRetain
	}
	if opts.ChunkSize == 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	if opts.ChunkSize < minChunkSize || opts.ChunkSize > maxChunkSize {
		return nil, fmt.Errorf("%w: chunk_size must be within [%d, %d], got %d",
			ErrInvalid, minChunkSize, maxChunkSize, opts.ChunkSize)
	}
	if opts.Workers <= 0 {
		opts.Workers = min(max(4*runtime.GOMAXPROCS(0), 4), 16)
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	return &Store{
		retain:    opts.Retain,
		chunkSize: opts.ChunkSize,
		workers:   opts.Workers,
		logger:    opts.Logger.Named("store"),
		now:       time.Now,
	}, nil
}
