package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// objKeyLock is a key's lock object, next to its manifests.
const objKeyLock = "lock"

// lockKeyObject takes the key's lock, the object store's counterpart of a
// directory store's per-key flock: commits of one key (from any host) and
// Delete run one at a time, so the generation a commit reads under it is the
// newest when it publishes (a pruned generation's number, free again, is
// never reused). The lock is created with a conditional create and
// refreshed like a lease; one whose holder stopped refreshing it for
// LeaseTTL is taken over. Without wait, a held lock is ErrBusy.
func (s *Store) lockKeyObject(ctx context.Context, prefix string, key Key, wait bool) (func(), error) {
	name := prefix + objKeyLock
	host, _ := os.Hostname()
	body, _ := json.Marshal(leaseBody{Op: "keylock", Key: key.String(), Host: host, PID: os.Getpid()})
	for {
		err := s.backend.Put(ctx, name, body, true)
		if err == nil {
			l := s.keepLease(name, "keylock", key.String())
			return func() { s.release(l) }, nil
		}
		if !errors.Is(err, ErrObjectExists) {
			return nil, fmt.Errorf("lock %s: %w", key, err)
		}
		fi, err := s.backend.Stat(ctx, name)
		if errors.Is(err, ErrObjectNotFound) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", key, err)
		}
		now, err := s.serverNow(ctx)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", key, err)
		}
		if !s.live(fi.Modified, now) || s.holderDead(ctx, name, host) {
			s.logger.Warn("taking over the key lock of a holder that stopped", "key", key.String())
			_ = s.backend.Delete(ctx, name)
			continue
		}
		if !wait {
			return nil, fmt.Errorf("%w: %s is being committed or deleted", ErrBusy, key)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the lock of %s: %w", key, context.Cause(ctx))
		case <-time.After(s.pollEvery):
		}
	}
}

// holderDead reports whether the lock name was taken by a process of this
// host that is gone (a plugin killed and restarted: its successor need not
// wait for the lock to expire, as the kernel frees a dead process's flock).
func (s *Store) holderDead(ctx context.Context, name, host string) bool {
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
