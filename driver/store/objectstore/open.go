package objectstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/hashicorp/go-hclog"
)

// engine is the object engine: a Store's chunks, manifests and leases are
// objects in backend (../README.md, "Object stores").
type engine struct {
	st        *store.Store // the store it keeps: RestoreGeneration, QueueChunks, CopyChunk
	logger    hclog.Logger
	retain    int
	chunkSize int
	workers   int

	backend   store.Backend
	swapper   store.Swapper // backend's compare-and-swap, nil when it has none
	toucher   store.Toucher // backend's touch, nil when it has none
	leaseTTL  time.Duration // how long a lease lives unrefreshed
	gcGrace   time.Duration // how old an unreferenced chunk must be to go
	settle    time.Duration // how long GC waits for listings to settle
	pollEvery time.Duration // how often a waiter looks again
}

var _ store.Engine = (*engine)(nil)

// Object store defaults (store.Options fields of the same names).
const (
	DefaultLeaseTTL = 30 * time.Second
	DefaultGCGrace  = 15 * time.Minute
	DefaultSettle   = 2 * time.Second
)

// Open opens a store kept in an object store. It has the same calls
// and guarantees as a directory store opened with store.Open; what rests on file
// locks there rests on leases here (see ../README.md, "Object stores").
func Open(b store.Backend, opts store.Options) (*store.Store, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil backend", store.ErrInvalid)
	}
	if opts.Workers <= 0 {
		// Object I/O waits on the network, not the CPU.
		opts.Workers = 16
	}
	e := &engine{backend: b}
	e.swapper, e.toucher = capabilities(b)
	e.leaseTTL = opts.LeaseTTL
	if e.leaseTTL <= 0 {
		e.leaseTTL = DefaultLeaseTTL
	}
	e.gcGrace = opts.GCGrace
	if e.gcGrace == 0 {
		e.gcGrace = DefaultGCGrace
	}
	e.settle = opts.Settle
	if e.settle == 0 {
		e.settle = DefaultSettle
	}
	e.pollEvery = min(time.Second, e.leaseTTL/4)
	s, err := store.New(b.String(), opts, func(s *store.Store) store.Engine {
		e.st, e.logger = s, s.Logger()
		e.retain, e.chunkSize, e.workers = s.Retain(), s.ChunkSize(), s.Workers()
		return e
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), objectOpTimeout)
	defer cancel()
	if err := b.Put(ctx, objMarker, []byte(`{"caravan_store":1}`), true); err != nil && !errors.Is(err, store.ErrObjectExists) {
		return nil, fmt.Errorf("%w: write store marker: %w", store.ErrUnavailable, err)
	}
	return s, nil
}

// capabilities returns b's Swapper and Toucher (nil where it has none),
// looking through wrappers.
func capabilities(b store.Backend) (store.Swapper, store.Toucher) {
	var sw store.Swapper
	var t store.Toucher
	for b != nil {
		if x, ok := b.(store.Swapper); ok && sw == nil {
			sw = x
		}
		if x, ok := b.(store.Toucher); ok && t == nil {
			t = x
		}
		u, ok := b.(store.Unwrapper)
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	return sw, t
}
