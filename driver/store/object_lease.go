package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// leaseBody is what a lease object holds: who holds it, for what. Liveness
// is judged by the object's modification time on the server's clock, never
// by a client's clock.
type leaseBody struct {
	Op   string `json:"op"`
	Key  string `json:"key,omitempty"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
}

// lease is a held lease object, refreshed in the background until released.
type lease struct {
	name string
	stop chan struct{}
	done sync.WaitGroup
}

// putLease writes (or refreshes) the lease object name and returns the
// server's time of the write.
func (s *Store) putLease(ctx context.Context, name, op, key string) (time.Time, error) {
	host, _ := os.Hostname()
	b, _ := json.Marshal(leaseBody{Op: op, Key: key, Host: host, PID: os.Getpid()})
	if err := s.backend.Put(ctx, name, b, false); err != nil {
		return time.Time{}, fmt.Errorf("write lease: %w", err)
	}
	fi, err := s.backend.Stat(ctx, name)
	if err != nil {
		return time.Time{}, fmt.Errorf("stat lease: %w", err)
	}
	return fi.Modified, nil
}

// live reports whether an object last written at modified is a live lease
// at the server time now.
func (s *Store) live(modified, now time.Time) bool {
	return modified.Add(s.leaseTTL).After(now)
}

// acquireLease takes a shared lease for a commit or restore: it writes its
// lease object, then looks for GC's. While a live GC lease exists it
// withdraws its own (so GC, which waits for shared leases to go, is never
// deadlocked) and waits, until ctx ends. Writing one's own lease before
// reading the other's, on both sides, means that of a commit and a GC
// starting together at least one sees the other.
func (s *Store) acquireLease(ctx context.Context, op string, key Key) (*lease, error) {
	name := objLeases + op + "-" + randomSuffix() + randomSuffix()
	for {
		now, err := s.putLease(ctx, name, op, key.String())
		if err != nil {
			return nil, err
		}
		gc, err := s.backend.Stat(ctx, objGCLease)
		if errors.Is(err, ErrObjectNotFound) || err == nil && !s.live(gc.Modified, now) {
			return s.keepLease(name, op, key.String()), nil
		}
		_ = s.backend.Delete(context.WithoutCancel(ctx), name)
		if err != nil {
			return nil, fmt.Errorf("read gc lease: %w", err)
		}
		s.logger.Debug("waiting for gc", "op", op, "key", key.String())
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for gc to finish: %w", context.Cause(ctx))
		case <-time.After(s.pollEvery):
		}
	}
}

// keepLease refreshes the held lease name every third of its TTL until
// release.
func (s *Store) keepLease(name, op, key string) *lease {
	l := &lease{name: name, stop: make(chan struct{})}
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		t := time.NewTicker(s.leaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), s.leaseTTL/3)
				_, err := s.putLease(ctx, name, op, key)
				cancel()
				if err != nil {
					s.logger.Warn("lease refresh failed", "lease", name, "error", err)
				}
			}
		}
	}()
	return l
}

// release stops refreshing the lease and deletes it.
func (s *Store) release(l *lease) {
	close(l.stop)
	l.done.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), s.leaseTTL)
	defer cancel()
	if err := s.backend.Delete(ctx, l.name); err != nil {
		s.logger.Warn("lease release failed; it expires by itself", "lease", l.name, "error", err)
	}
}

// acquireGCLease announces a sweep (GC's lease, which makes new commits and
// restores wait), lets listings settle, then waits until no live commit or
// restore lease remains, deleting expired ones (their holders crashed). It
// returns the lease and the server time the wait ended.
func (s *Store) acquireGCLease(ctx context.Context) (*lease, time.Time, error) {
	if _, err := s.putLease(ctx, objGCLease, "gc", ""); err != nil {
		return nil, time.Time{}, err
	}
	l := s.keepLease(objGCLease, "gc", "")
	fail := func(err error) (*lease, time.Time, error) {
		s.release(l)
		return nil, time.Time{}, err
	}
	if s.settle > 0 {
		select {
		case <-ctx.Done():
			return fail(context.Cause(ctx))
		case <-time.After(s.settle):
		}
	}
	for {
		now, err := s.putLease(ctx, objGCLease, "gc", "")
		if err != nil {
			return fail(err)
		}
		busy, err := s.liveLeases(ctx, now, "")
		if err != nil {
			return fail(err)
		}
		if len(busy) == 0 {
			return l, now, nil
		}
		s.logger.Debug("gc waiting for leases", "leases", busy)
		select {
		case <-ctx.Done():
			return fail(fmt.Errorf("waiting for %d commits or restores: %w", len(busy), context.Cause(ctx)))
		case <-time.After(s.pollEvery):
		}
	}
}

// liveLeases lists the live commit and restore leases (of key only, when
// key is not empty) at server time now, and deletes expired ones.
func (s *Store) liveLeases(ctx context.Context, now time.Time, key string) ([]string, error) {
	var busy, expired []string
	err := s.backend.List(ctx, objLeases, func(o ObjectInfo) error {
		if o.Name == objGCLease || !strings.HasPrefix(o.Name, objLeases) {
			return nil
		}
		if !s.live(o.Modified, now) {
			expired = append(expired, o.Name)
			return nil
		}
		if key != "" && !s.leaseOf(ctx, o.Name, key) {
			return nil
		}
		busy = append(busy, o.Name)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	if key == "" {
		for _, n := range expired {
			if err := s.backend.Delete(ctx, n); err == nil {
				s.logger.Info("deleted expired lease", "lease", n)
			}
		}
	}
	return busy, nil
}

// leaseOf reports whether the commit lease name is held for key.
func (s *Store) leaseOf(ctx context.Context, name, key string) bool {
	if !strings.HasPrefix(name, objLeases+"commit-") {
		return false
	}
	rc, _, err := s.backend.Get(ctx, name)
	if err != nil {
		return false
	}
	defer rc.Close()
	var b leaseBody
	if err := json.NewDecoder(rc).Decode(&b); err != nil {
		return false
	}
	return b.Key == key
}

// serverNow writes a probe lease and returns the server's time.
func (s *Store) serverNow(ctx context.Context) (time.Time, error) {
	name := objLeases + "probe-" + randomSuffix()
	now, err := s.putLease(ctx, name, "probe", "")
	_ = s.backend.Delete(ctx, name)
	return now, err
}
