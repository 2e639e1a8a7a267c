// Package filebackend is a store.Backend kept in a POSIX directory, for
// tests only: each object is a file below the directory. It runs the object
// store engine (objectstore.Open: leases, conditional manifest create) on
// a directory, which proves the Backend interface neutral (the shared suite
// in driver/store/storetest runs against it in plain `go test`). It is not
// what a driver's checkpoint_store directory uses: that is store.Open, the
// directory engine, whose on-disk layout and flock-based locking are
// unchanged (see driver/store/README.md, "A POSIX Backend").
package filebackend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/caravan-nomad/caravan/driver/store"
)

// Backend is a directory as a store.Backend. Create it with New.
type Backend struct {
	dir  string
	root *os.Root
}

var _ store.Backend = (*Backend)(nil)

// tmpPrefix starts the name of a file being written. Object names never
// have a component starting with ".", so List never shows one.
const tmpPrefix = ".tmp-"

// New opens dir, which must exist, as a Backend.
func New(dir string) (*Backend, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return &Backend{dir: dir, root: root}, nil
}

// Close releases the directory.
func (b *Backend) Close() error { return b.root.Close() }

// String implements store.Backend.
func (b *Backend) String() string { return "dir " + b.dir }

// checkName refuses a name that is not a clean relative slash path, or has
// a component starting with "." (reserved for temp files).
func checkName(name string) error {
	if name == "" || path.Clean(name) != name || strings.HasPrefix(name, "/") {
		return fmt.Errorf("%w: object name %q is not a clean relative path", store.ErrInvalid, name)
	}
	for p := range strings.SplitSeq(name, "/") {
		if strings.HasPrefix(p, ".") {
			return fmt.Errorf("%w: object name %q has a component starting with '.'", store.ErrInvalid, name)
		}
	}
	return nil
}

// Put implements store.Backend: the data is written to a temp file in the
// object's directory and fsynced, then renamed over the name, or, with
// ifAbsent, hard-linked to it (link fails when the name exists: a
// conditional create that is atomic on local file systems and NFS); then
// the directory is fsynced. A Put that returned nil is durable.
func (b *Backend) Put(ctx context.Context, name string, data []byte, ifAbsent bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	dir := path.Dir(name)
	if err := b.mkdirs(dir); err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	tmp, err := b.writeTemp(dir, data)
	if err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	defer func() { _ = b.root.Remove(tmp) }()
	if ifAbsent {
		err = b.root.Link(tmp, name)
		if errors.Is(err, fs.ErrExist) {
			return store.ErrObjectExists
		}
	} else {
		err = b.root.Rename(tmp, name)
	}
	if err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	return b.syncDir(dir)
}

// mkdirs creates dir and its missing parents and, when it created any,
// fsyncs every folder from dir's parent up to the root, so a new folder
// survives a power loss with the object written into it.
func (b *Backend) mkdirs(dir string) error {
	if _, err := b.root.Lstat(dir); err == nil {
		return nil
	}
	if err := b.root.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for d := dir; d != "."; {
		d = path.Dir(d)
		if err := b.syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// writeTemp writes data to a new temp file in dir, fsynced, and returns its
// name.
func (b *Backend) writeTemp(dir string, data []byte) (string, error) {
	var r [8]byte
	_, _ = rand.Read(r[:])
	tmp := path.Join(dir, tmpPrefix+hex.EncodeToString(r[:]))
	f, err := b.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = b.root.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

func (b *Backend) syncDir(dir string) error {
	d, err := b.root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Get implements store.Backend.
func (b *Backend) Get(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if err := checkName(name); err != nil {
		return nil, 0, err
	}
	f, err := b.root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, store.ErrObjectNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = store.ErrObjectNotFound
	}
	if err != nil {
		_ = f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// Stat implements store.Backend. The modification time is the file's,
// set by the file system (on NFS, by the server's clock).
func (b *Backend) Stat(ctx context.Context, name string) (store.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return store.ObjectInfo{}, err
	}
	if err := checkName(name); err != nil {
		return store.ObjectInfo{}, err
	}
	fi, err := b.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.Mode().IsRegular()) {
		return store.ObjectInfo{}, store.ErrObjectNotFound
	}
	if err != nil {
		return store.ObjectInfo{}, err
	}
	return store.ObjectInfo{Name: name, Size: fi.Size(), Modified: fi.ModTime()}, nil
}

// List implements store.Backend: every regular file whose name starts with
// prefix, in lexical order; temp files are skipped.
func (b *Backend) List(ctx context.Context, prefix string, fn func(store.ObjectInfo) error) error {
	start := "."
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = prefix[:i]
	}
	err := fs.WalkDir(b.root.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p != start && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			// Skip folders that cannot hold a match.
			if p != start && !strings.HasPrefix(p+"/", prefix) && !strings.HasPrefix(prefix, p+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(p, prefix) {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted since listed
		}
		if err != nil {
			return err
		}
		return fn(store.ObjectInfo{Name: p, Size: fi.Size(), Modified: fi.ModTime()})
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Delete implements store.Backend. Empty folders are left (a concurrent
// Put may be about to write into one); List does not show them.
func (b *Backend) Delete(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	err := b.root.Remove(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
