package store

import (
	"context"
	"errors"
	"fmt"
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
// which are per process; the in-process locks below make the goroutines of
// one process exclude each other regardless.

// lockPollInterval is how often a context-aware lock retries flock(LOCK_NB).
const lockPollInterval = 5 * time.Millisecond

var (
	procLocksMu sync.Mutex
	procKeyLock = map[string]chan struct{}{}
	procRWLock  = map[string]*sync.RWMutex{}
)

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

func storeProcLock(path string) *sync.RWMutex {
	procLocksMu.Lock()
	defer procLocksMu.Unlock()
	rw, ok := procRWLock[path]
	if !ok {
		rw = &sync.RWMutex{}
		procRWLock[path] = rw
	}
	return rw
}

// unlocker releases a lock.
type unlocker func()

// lockKey takes the exclusive lock of a key directory (created if missing),
// waiting until ctx is done.
func lockKey(ctx context.Context, keyDir string) (unlocker, error) {
	if err := os.MkdirAll(keyDir, dirPerm); err != nil {
		return nil, fmt.Errorf("create key directory: %w", err)
	}
	path := keyDir + "/lock"
	ch := keyProcLock(path)
	select {
	case ch <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for key lock: %w", ctx.Err())
	}
	f, err := flockFile(ctx, path, syscall.LOCK_EX)
	if err != nil {
		<-ch
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
		<-ch
	}, nil
}

// lockStore takes the store-wide lock, shared or exclusive.
func (s *Store) lockStore(ctx context.Context, exclusive bool) (unlocker, error) {
	path := s.root + "/.gc.lock"
	rw := storeProcLock(path)
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
		rw.Lock()
	} else {
		rw.RLock()
	}
	release := rw.RUnlock
	if exclusive {
		release = rw.Unlock
	}
	f, err := flockFile(ctx, path, how)
	if err != nil {
		release()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
		release()
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
