package store

import (
	"context"
	"errors"
	"fmt"
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
	for {
		err := s.backend.Put(ctx, name, []byte(`{"op":"commit"}`), true)
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
		if !s.live(fi.Modified, now) {
			s.logger.Warn("taking over an expired key lock (its holder stopped)", "key", key.String())
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
