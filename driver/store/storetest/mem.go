// Package storetest holds what tests of object store backends share: an
// in-memory Backend, a fault-injecting wrapper, and Run, the suite every
// backend must pass (the in-memory one in plain `go test`, S3 against a
// real SeaweedFS server in driver/store/s3store).
package storetest

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caravan-nomad/caravan/driver/store"
)

// Mem is an in-memory store.Backend with S3's semantics (conditional
// create, compare-and-swap on ETags, read-after-write, sorted listings).
// Not for production use.
type Mem struct {
	mu      sync.Mutex
	objects map[string]memObject
	// HideFromList, when set, hides matching names from List (a lagging
	// listing).
	HideFromList func(name string) bool
	// ListLag, when set, hides the objects written (or touched) less than
	// ListLag ago from List: a listing that lags behind the newest writes.
	ListLag time.Duration
}

type memObject struct {
	data     []byte
	modified time.Time
}

// etag is the object's entity tag: as S3's for a single PUT, the MD5 of
// its contents.
func (o memObject) etag() string {
	sum := md5.Sum(o.data)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

var (
	_ store.Swapper = (*Mem)(nil)
	_ store.Toucher = (*Mem)(nil)
)

// NewMem returns an empty Mem.
func NewMem() *Mem { return &Mem{objects: map[string]memObject{}} }

// Put implements store.Backend.
func (m *Mem) Put(ctx context.Context, name string, data []byte, ifAbsent bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[name]; ok && ifAbsent {
		return store.ErrObjectExists
	}
	m.objects[name] = memObject{data: bytes.Clone(data), modified: time.Now()}
	return nil
}

// Get implements store.Backend.
func (m *Mem) Get(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[name]
	if !ok {
		return nil, 0, store.ErrObjectNotFound
	}
	return io.NopCloser(bytes.NewReader(o.data)), int64(len(o.data)), nil
}

// Stat implements store.Backend.
func (m *Mem) Stat(ctx context.Context, name string) (store.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return store.ObjectInfo{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[name]
	if !ok {
		return store.ObjectInfo{}, store.ErrObjectNotFound
	}
	return store.ObjectInfo{Name: name, Size: int64(len(o.data)), Modified: o.modified, ETag: o.etag()}, nil
}

// PutIfMatch implements store.Swapper.
func (m *Mem) PutIfMatch(ctx context.Context, name string, data []byte, etag string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[name]
	switch {
	case etag == "" && ok:
		return "", store.ErrObjectExists
	case etag != "" && !ok:
		return "", store.ErrObjectNotFound
	case etag != "" && o.etag() != etag:
		return "", store.ErrObjectChanged
	}
	o = memObject{data: bytes.Clone(data), modified: time.Now()}
	m.objects[name] = o
	return o.etag(), nil
}

// DeleteIfMatch implements store.Swapper.
func (m *Mem) DeleteIfMatch(ctx context.Context, name, etag string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[name]
	if !ok {
		return nil
	}
	if o.etag() != etag {
		return store.ErrObjectChanged
	}
	delete(m.objects, name)
	return nil
}

// Touch implements store.Toucher.
func (m *Mem) Touch(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[name]
	if !ok {
		return store.ErrObjectNotFound
	}
	o.modified = time.Now()
	m.objects[name] = o
	return nil
}

// List implements store.Backend.
func (m *Mem) List(ctx context.Context, prefix string, fn func(store.ObjectInfo) error) error {
	m.mu.Lock()
	var out []store.ObjectInfo
	shownBefore := time.Now().Add(-m.ListLag)
	for n, o := range m.objects {
		if m.ListLag > 0 && !o.modified.Before(shownBefore) {
			continue
		}
		if strings.HasPrefix(n, prefix) && (m.HideFromList == nil || !m.HideFromList(n)) {
			out = append(out, store.ObjectInfo{Name: n, Size: int64(len(o.data)), Modified: o.modified, ETag: o.etag()})
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b store.ObjectInfo) int { return strings.Compare(a.Name, b.Name) })
	for _, o := range out {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

// Delete implements store.Backend.
func (m *Mem) Delete(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, name)
	return nil
}

// String implements store.Backend.
func (m *Mem) String() string { return "mem://" }

// Faulty wraps a Backend and lets a test fail or stall chosen calls.
type Faulty struct {
	store.Backend
	// BeforePut, when set, runs before every Put; an error it returns is
	// the Put's.
	BeforePut func(ctx context.Context, name string) error
}

// Put implements store.Backend.
func (f *Faulty) Put(ctx context.Context, name string, data []byte, ifAbsent bool) error {
	if f.BeforePut != nil {
		if err := f.BeforePut(ctx, name); err != nil {
			return err
		}
	}
	return f.Backend.Put(ctx, name, data, ifAbsent)
}

// Unwrap implements store.Unwrapper: the store uses the wrapped backend's
// compare-and-swap and touch, which Faulty does not intercept.
func (f *Faulty) Unwrap() store.Backend { return f.Backend }

// AbortStaleUploads passes through to the wrapped backend when it cleans
// uploads.
func (f *Faulty) AbortStaleUploads(ctx context.Context, cutoff time.Time) (int, error) {
	if c, ok := f.Backend.(store.UploadCleaner); ok {
		return c.AbortStaleUploads(ctx, cutoff)
	}
	return 0, nil
}
