package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"
)

// Locks exist at two levels, always taken in the order key lock -> store lock
// and never one while waiting for the other in reverse, so they cannot
// deadlock:
//
//   - a per-key exclusive lock (<keydir>/lock) serialises commits and
//     retention of one key across goroutines, processes and hosts;
//   - a store-wide shared/exclusive lock (<root>/.gc.lock): Commit and Restore
//     hold it shared for their whole duration, the chunk sweep of GC holds it
//     exclusive, so GC never deletes a chunk a commit in flight is about to
//     reference or a restore is reading.
//
// flock(2) locks belong to open file descriptions, which is what we want on
// local file systems. On NFS Linux emulates flock with POSIX byte-range locks,
// which belong to the process and are all dropped when the process closes any
// descriptor of the file. So the goroutines of one process also exclude each
// other with in-process locks, and a process holds at most one descriptor of
// each lock file at a time: the shared store lock is taken once for all the
// process's commits and restores in flight and released by the last one.

// lockPollInterval is how often a context-aware lock retries flock(LOCK_NB).
const lockPollInterval = 5 * time.Millisecond

var (
	procLocksMu   sync.Mutex
	procKeyLock   = map[string]chan struct{}{}
	procStoreLock = map[string]*storeLock{}
)

// storeLock is this process's side of one store's .gc.lock.
type storeLock struct {
	rw      sync.RWMutex // readers: commits and restores; writer: GC sweep
	mu      sync.Mutex   // guards readers and f
	readers int
	f       *os.File // the flocked descriptor while readers > 0
}

func keyProcLock(path string) chan struct{} {
	procLocksMu.Lock()
	defer procLocksMu.Unlock()
	ch, ok := procKeyLock[path]
	if !ok {
		ch = make(chan struct{}, 1)
		procKeyLock[path] = ch
	}
	return ch
}

func storeProcLock(path string) *storeLock {
	procLocksMu.Lock()
	defer procLocksMu.Unlock()
	l, ok := procStoreLock[path]
	if !ok {
		l = &storeLock{}
		procStoreLock[path] = l
	}
	return l
}

// unlocker releases a lock.
type unlocker func()

// lockKey takes the exclusive lock of a key directory (created if missing),
// waiting until ctx is done.
func lockKey(ctx context.Context, keyDir string) (unlocker, error) {
	path := keyDir + "/lock"
	ch := keyProcLock(path)
	select {
	case ch <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for key lock: %w", ctx.Err())
	}
	for {
		if err := os.MkdirAll(keyDir, dirPerm); err != nil {
			<-ch
			return nil, fmt.Errorf("create key directory: %w", err)
		}
		f, err := flockFile(ctx, path, syscall.LOCK_EX)
		if errors.Is(err, fs.ErrNotExist) {
			continue // Delete removed the key directory under us
		}
		if err != nil {
			<-ch
			return nil, err
		}
		if !stillLinked(f, path) {
			// Delete removed the key while we waited: this lock file
			// no longer guards anything. Lock the new one.
			_ = f.Close()
			continue
		}
		return keyUnlocker(f, ch), nil
	}
}

// tryLockKey takes the lock of an existing key directory without waiting:
// ErrBusy when a commit, retention or deletion holds it.
func tryLockKey(keyDir string) (unlocker, error) {
	path := keyDir + "/lock"
	ch := keyProcLock(path)
	select {
	case ch <- struct{}{}:
	default:
		return nil, fmt.Errorf("%w: a commit or deletion in this process holds its lock", ErrBusy)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		<-ch
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		<-ch
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: a commit or deletion holds %s", ErrBusy, path)
		}
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return keyUnlocker(f, ch), nil
}

func keyUnlocker(f *os.File, ch chan struct{}) unlocker {
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
		<-ch
	}
}

// stillLinked reports whether path still names the file f has open.
func stillLinked(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// lockStore takes the store-wide lock, shared or exclusive.
func (s *Store) lockStore(ctx context.Context, exclusive bool) (unlocker, error) {
	path := s.root + "/.gc.lock"
	l := storeProcLock(path)
	if exclusive {
		l.rw.Lock()
		f, err := flockFile(ctx, path, syscall.LOCK_EX)
		if err != nil {
			l.rw.Unlock()
			return nil, err
		}
		return func() {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			_ = f.Close()
			l.rw.Unlock()
		}, nil
	}
	l.rw.RLock()
	l.mu.Lock()
	if l.readers == 0 {
		f, err := flockFile(ctx, path, syscall.LOCK_SH)
		if err != nil {
			l.mu.Unlock()
			l.rw.RUnlock()
			return nil, err
		}
		l.f = f
	}
	l.readers++
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		l.readers--
		if l.readers == 0 {
			_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
			_ = l.f.Close()
			l.f = nil
		}
		l.mu.Unlock()
		l.rw.RUnlock()
	}, nil
}

// flockFile opens (creating) path and flocks it with how, retrying a
// non-blocking flock until it succeeds or ctx is done.
func flockFile(ctx context.Context, path string, how int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	var t *time.Ticker
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		if t == nil {
			t = time.NewTicker(lockPollInterval)
			defer t.Stop()
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", path, ctx.Err())
		}
	}
}

// tryLockStoreExclusive takes the store-wide lock exclusively if no commit,
// restore or sweep of this process holds it, waiting for other processes'
// at most until ctx ends: ErrBusy otherwise. It never makes this process's
// next commits queue behind it (lockStore's exclusive wait does).
func (s *Store) tryLockStoreExclusive(ctx context.Context) (unlocker, error) {
	path := s.root + "/.gc.lock"
	l := storeProcLock(path)
	if !l.rw.TryLock() {
		return nil, fmt.Errorf("%w: a commit, restore or sweep of this process holds the store", ErrBusy)
	}
	f, err := flockFile(ctx, path, syscall.LOCK_EX)
	if err != nil {
		l.rw.Unlock()
		return nil, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
		l.rw.Unlock()
	}, nil
}
