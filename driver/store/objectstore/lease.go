package objectstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caravan-nomad/caravan/driver/store"
)

// leaseBody is what a lease object holds: who holds it, for what. Liveness
// is judged by the object's modification time on the server's clock, never
// by a client's clock. Nonce makes every write's contents, so its ETag,
// distinct (an ETag is the MD5 of the contents), so a compare-and-swap
// never mistakes one write for another of the same holder.
type leaseBody struct {
	Op    string `json:"op"`
	Key   string `json:"key,omitempty"`
	Host  string `json:"host"`
	PID   int    `json:"pid"`
	Nonce string `json:"nonce,omitempty"`
}

// errLeaseLost is a refresh of an exclusive lease another client took over
// (its holder paused longer than LeaseTTL).
var errLeaseLost = errors.New("lease taken over by another client")

// lease is a held lease object, refreshed in the background until released.
type lease struct {
	name, op, key string
	at            time.Time // the server's time of the first write
	stop          chan struct{}
	done          sync.WaitGroup

	mu   sync.Mutex // serialises refreshes
	etag string     // an exclusive lease's ETag under a Swapper ("" otherwise)
	lost atomic.Bool
}

// leaseBytes encodes a fresh lease body for op on key.
func leaseBytes(op, key string) []byte {
	host, _ := os.Hostname()
	b, _ := json.Marshal(leaseBody{Op: op, Key: key, Host: host, PID: os.Getpid(), Nonce: store.RandomSuffix()})
	return b
}

// putLease writes (or refreshes) the lease object name and returns the
// server's time of the write.
func (s *engine) putLease(ctx context.Context, name, op, key string) (time.Time, error) {
	if err := s.backend.Put(ctx, name, leaseBytes(op, key), false); err != nil {
		return time.Time{}, fmt.Errorf("write lease: %w", err)
	}
	return s.leaseTime(ctx, name)
}

// leaseTime returns the server's modification time of the lease name.
func (s *engine) leaseTime(ctx context.Context, name string) (time.Time, error) {
	fi, err := s.backend.Stat(ctx, name)
	if err != nil {
		return time.Time{}, fmt.Errorf("stat lease: %w", err)
	}
	return fi.Modified, nil
}

// refreshLease writes the held lease l again and returns the server's time
// of the write. An exclusive lease under a Swapper is written only if it is
// still the one this client wrote last: otherwise it was taken over, and
// the refresh fails with errLeaseLost (and l is marked lost).
func (s *engine) refreshLease(ctx context.Context, l *lease) (time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost.Load() {
		return time.Time{}, errLeaseLost
	}
	if l.etag == "" || s.swapper == nil {
		return s.putLease(ctx, l.name, l.op, l.key)
	}
	etag, err := s.swapper.PutIfMatch(ctx, l.name, leaseBytes(l.op, l.key), l.etag)
	if errors.Is(err, store.ErrObjectChanged) || errors.Is(err, store.ErrObjectNotFound) {
		l.lost.Store(true)
		return time.Time{}, fmt.Errorf("%s: %w", l.name, errLeaseLost)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("write lease: %w", err)
	}
	l.etag = etag
	return s.leaseTime(ctx, l.name)
}

// live reports whether an object last written at modified is a live lease
// at the server time now.
func (s *engine) live(modified, now time.Time) bool {
	return modified.Add(s.leaseTTL).After(now)
}

// acquireLease takes a shared lease for a commit or restore: it writes its
// lease object and names it in the lease index (with a Swapper), then
// looks for GC's lease. While a live GC lease exists it withdraws its own
// (so GC, which waits for shared leases to go, is never deadlocked) and
// waits, until ctx ends. Writing one's own lease before reading the
// other's, on both sides, means that of a commit and a GC starting together
// at least one sees the other; GC reads the index by key, so this holds
// whatever a listing shows.
func (s *engine) acquireLease(ctx context.Context, op string, key store.Key) (*lease, error) {
	name := objLeases + op + "-" + store.RandomSuffix() + store.RandomSuffix()
	// Giving up, clean up briefly: the caller's deadline (kill_timeout) may
	// be spent, and a lease left behind only expires.
	abandon := func() { s.dropLease(name, s.pollEvery) }
	for {
		now, err := s.putLease(ctx, name, op, key.String())
		if err != nil {
			return nil, err
		}
		if err := s.indexLease(ctx, name); err != nil {
			abandon()
			return nil, err
		}
		gc, err := s.backend.Stat(ctx, objGCLease)
		if errors.Is(err, store.ErrObjectNotFound) || err == nil && !s.live(gc.Modified, now) {
			l := &lease{name: name, op: op, key: key.String(), at: now}
			s.keepLease(l)
			return l, nil
		}
		if err != nil {
			abandon()
			return nil, fmt.Errorf("read gc lease: %w", err)
		}
		// Withdraw while GC runs; the index entry stays (it is added again,
		// at no cost, on the next try).
		_ = s.backend.Delete(context.WithoutCancel(ctx), name)
		s.logger.Debug("waiting for gc", "op", op, "key", key.String())
		select {
		case <-ctx.Done():
			abandon()
			return nil, fmt.Errorf("waiting for gc to finish: %w", context.Cause(ctx))
		case <-time.After(s.pollEvery):
		}
	}
}

// dropLease deletes the shared lease name and its index entry, best
// effort, within limit (GC drops index entries whose lease is gone).
func (s *engine) dropLease(name string, limit time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := s.backend.Delete(ctx, name); err != nil {
		s.logger.Warn("lease release failed; it expires by itself", "lease", name, "error", err)
	}
	if err := s.unindexLeases(ctx, []string{name}); err != nil {
		s.logger.Debug("lease index update failed; gc drops the entry", "lease", name, "error", err)
	}
}

// keepLease refreshes the held lease every third of its TTL until release
// (or, for an exclusive lease, until it is found taken over).
func (s *engine) keepLease(l *lease) {
	l.stop = make(chan struct{})
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
				_, err := s.refreshLease(ctx, l)
				cancel()
				if errors.Is(err, errLeaseLost) {
					s.logger.Warn("lease taken over by another client after a pause longer than its ttl", "lease", l.name)
					return
				}
				if err != nil {
					s.logger.Warn("lease refresh failed", "lease", l.name, "error", err)
				}
			}
		}
	}()
}

// release stops refreshing the lease and deletes it: an exclusive lease
// under a Swapper only if it is still this client's, so a holder whose
// lease was taken over never deletes its successor's.
func (s *engine) release(l *lease) {
	close(l.stop)
	l.done.Wait()
	if l.etag == "" || s.swapper == nil {
		s.dropLease(l.name, s.leaseTTL)
		return
	}
	if l.lost.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.leaseTTL)
	defer cancel()
	l.mu.Lock()
	etag := l.etag
	l.mu.Unlock()
	err := s.swapper.DeleteIfMatch(ctx, l.name, etag)
	if errors.Is(err, store.ErrObjectChanged) {
		s.logger.Warn("lease was taken over by another client; left to it", "lease", l.name)
		return
	}
	if err != nil {
		s.logger.Warn("lease release failed; it expires by itself", "lease", l.name, "error", err)
	}
}

// acquireGCLease takes GC's exclusive lease (ErrBusy while another
// client's GC holds it), which makes new commits and restores wait, lets
// listings settle, then waits until no live commit or restore lease
// remains, deleting expired ones (their holders crashed); it gives up with
// ErrBusy after LeaseTTL, so commits and restores queued behind it wait no
// longer than that. It returns the lease and the server time the wait
// ended.
func (s *engine) acquireGCLease(ctx context.Context) (*lease, time.Time, error) {
	l, err := s.takeExclusive(ctx, objGCLease, "gc", "", false)
	if err != nil {
		return nil, time.Time{}, err
	}
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
	var first time.Time
	for {
		now, err := s.refreshLease(ctx, l)
		if err != nil {
			return fail(err)
		}
		busy, err := s.liveLeases(ctx, now)
		if err != nil {
			return fail(err)
		}
		if len(busy) == 0 {
			return l, now, nil
		}
		if first.IsZero() {
			first = now
		}
		if now.Sub(first) >= s.leaseTTL {
			// New commits and restores queue behind GC's lease: do not
			// hold them longer than a lease lives. The next GC tries again.
			return fail(fmt.Errorf("%w: %d commits or restores in flight for %s; gc deferred", store.ErrBusy, len(busy), s.leaseTTL))
		}
		s.logger.Debug("gc waiting for leases", "leases", busy)
		select {
		case <-ctx.Done():
			return fail(fmt.Errorf("waiting for %d commits or restores: %w", len(busy), context.Cause(ctx)))
		case <-time.After(s.pollEvery):
		}
	}
}

// liveLeases returns the live commit and restore leases at server time now,
// found by key in the lease index (with a Swapper) and by a listing of
// leases/ (plugins of older versions write no index entry), and deletes
// expired ones.
func (s *engine) liveLeases(ctx context.Context, now time.Time) ([]string, error) {
	var busy, expired []string
	seen := map[string]bool{}
	err := s.backend.List(ctx, objLeases, func(o store.ObjectInfo) error {
		if o.Name == objGCLease || !strings.HasPrefix(o.Name, objLeases) {
			return nil
		}
		seen[o.Name] = true
		if !s.live(o.Modified, now) {
			expired = append(expired, o.Name)
			return nil
		}
		busy = append(busy, o.Name)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	indexed, stale, err := s.indexedLeases(ctx, now, seen)
	if err != nil {
		return nil, err
	}
	busy = append(busy, indexed...)
	expired = append(expired, stale...)
	for _, n := range expired {
		if err := s.backend.Delete(ctx, n); err == nil {
			s.logger.Info("deleted expired lease", "lease", n)
		}
	}
	return busy, nil
}

// serverNow writes a probe lease and returns the server's time.
func (s *engine) serverNow(ctx context.Context) (time.Time, error) {
	name := objLeases + "probe-" + store.RandomSuffix()
	now, err := s.putLease(ctx, name, "probe", "")
	_ = s.backend.Delete(ctx, name)
	return now, err
}
