package objectstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/caravan-nomad/caravan/driver/store"
)

// objKeyLock is a key's lock object, next to its manifests.
const objKeyLock = "lock"

// lockKeyObject takes the key's lock, the object store's counterpart of a
// directory store's per-key flock: commits of one key (from any host) and
// Delete run one at a time, so the generation a commit reads under it is the
// newest when it publishes (a pruned generation's number, free again, is
// never reused). Without wait, a held lock is ErrBusy.
func (s *engine) lockKeyObject(ctx context.Context, prefix string, key store.Key, wait bool) (func(), error) {
	l, err := s.keyLock(ctx, prefix, key, wait)
	if err != nil {
		return nil, err
	}
	return func() { s.release(l) }, nil
}

// keyLock is lockKeyObject returning the held lock (release it with
// release), for a commit that checks it still holds it before publishing.
func (s *engine) keyLock(ctx context.Context, prefix string, key store.Key, wait bool) (*lease, error) {
	l, err := s.takeExclusive(ctx, prefix+objKeyLock, "keylock", key.String(), wait)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", key, err)
	}
	return l, nil
}

// stillHeld refreshes the key lock l at once: with a Swapper, a lock
// another client took over (this one paused past LeaseTTL) is ErrBusy, so
// the commit does not publish what it read under a lock it lost.
func (s *engine) stillHeld(ctx context.Context, l *lease, key store.Key) error {
	_, err := s.refreshLease(ctx, l)
	if errors.Is(err, errLeaseLost) {
		return fmt.Errorf("%w: the lock of %s was taken over by another client while this commit paused; not published", store.ErrBusy, key)
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", key, err)
	}
	return nil
}

// takeExclusive takes the exclusive lease object name (a key's lock, GC's
// lease): it is created with a conditional create and refreshed like a
// lease; one whose holder stopped refreshing it for LeaseTTL, or that a
// process of this host now gone holds, is taken over. With a Swapper the
// take-over is a compare-and-swap on the stale object's ETag, so of two
// clients taking over one stale lock at the same instant exactly one wins,
// and refreshes and the release are conditional the same way (a holder
// whose lock was taken over neither refreshes nor deletes its successor's).
// Without one it is a delete and a new conditional create, and two clients
// may both win (../README.md, "What the store relies on"). Without wait, a
// live lock is ErrBusy.
func (s *engine) takeExclusive(ctx context.Context, name, op, key string, wait bool) (*lease, error) {
	host, _ := os.Hostname()
	for {
		etag, err := s.createExclusive(ctx, name, leaseBytes(op, key), "")
		if err == nil {
			return s.holdExclusive(name, op, key, etag), nil
		}
		if !errors.Is(err, store.ErrObjectExists) {
			return nil, err
		}
		fi, err := s.backend.Stat(ctx, name)
		if errors.Is(err, store.ErrObjectNotFound) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, err
		}
		now, err := s.serverNow(ctx)
		if err != nil {
			return nil, err
		}
		if !s.live(fi.Modified, now) || s.holderDead(ctx, name, host) {
			s.logger.Warn("taking over a lock whose holder stopped", "lock", name, "op", op, "key", key)
			etag, err := s.takeOver(ctx, name, leaseBytes(op, key), fi.ETag)
			if err == nil {
				return s.holdExclusive(name, op, key, etag), nil
			}
			if !errors.Is(err, store.ErrObjectChanged) && !errors.Is(err, store.ErrObjectNotFound) && !errors.Is(err, store.ErrObjectExists) {
				return nil, err
			}
			continue // another client took it over first, or it was released
		}
		if !wait {
			return nil, fmt.Errorf("%w: %s", store.ErrBusy, busyReason(op))
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", name, context.Cause(ctx))
		case <-time.After(s.pollEvery):
		}
	}
}

// createExclusive writes body under name only if etag is the object's ETag
// or, with etag "", only if there is none, and returns the new ETag (""
// without a Swapper, where only the create is conditional).
func (s *engine) createExclusive(ctx context.Context, name string, body []byte, etag string) (string, error) {
	if s.swapper != nil {
		return s.swapper.PutIfMatch(ctx, name, body, etag)
	}
	return "", s.backend.Put(ctx, name, body, true)
}

// takeOver replaces the stale lock name whose ETag was etag.
func (s *engine) takeOver(ctx context.Context, name string, body []byte, etag string) (string, error) {
	if s.swapper != nil && etag != "" {
		return s.swapper.PutIfMatch(ctx, name, body, etag)
	}
	if err := s.backend.Delete(ctx, name); err != nil {
		return "", err
	}
	return s.createExclusive(ctx, name, body, "")
}

// holdExclusive starts refreshing the exclusive lease just written.
func (s *engine) holdExclusive(name, op, key, etag string) *lease {
	l := &lease{name: name, op: op, key: key, etag: etag}
	s.keepLease(l)
	return l
}

// holderDead reports whether the lock name was taken by a process of this
// host that is gone (a plugin killed and restarted: its successor need not
// wait for the lock to expire, as the kernel frees a dead process's flock).
func (s *engine) holderDead(ctx context.Context, name, host string) bool {
	b, err := s.getSmall(ctx, name)
	if err != nil {
		return false
	}
	var l leaseBody
	if json.Unmarshal(b, &l) != nil || l.Host != host || l.PID <= 0 || l.PID == os.Getpid() {
		return false
	}
	err = syscall.Kill(l.PID, 0)
	return errors.Is(err, syscall.ESRCH)
}

// busyReason says what holds an exclusive lease of op.
func busyReason(op string) string {
	if op == "gc" {
		return "another client's gc is sweeping"
	}
	return "it is being committed or deleted"
}
