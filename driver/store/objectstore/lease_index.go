package objectstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/caravan-nomad/caravan/driver/store"
)

// leaseIndex is the body of the lease index object: the names of the
// commit and restore leases that may be live. Commits and restores add
// theirs (compare-and-swap on the index's ETag) before they look for GC's
// lease, and GC reads it with a GET, which S3 makes read-after-write
// consistent, where a listing may lag. Seq makes every version's contents
// distinct.
type leaseIndex struct {
	Seq    uint64   `json:"seq"`
	Leases []string `json:"leases"`
}

// readLeaseIndex returns the index and its ETag ("" when there is none).
func (s *engine) readLeaseIndex(ctx context.Context) (leaseIndex, string, error) {
	fi, err := s.backend.Stat(ctx, objLeaseIndex)
	if errors.Is(err, store.ErrObjectNotFound) {
		return leaseIndex{}, "", nil
	}
	if err != nil {
		return leaseIndex{}, "", fmt.Errorf("stat lease index: %w", err)
	}
	// Read after the Stat: contents newer than the ETag make the
	// conditional write that follows fail and retry, never lose an entry.
	b, err := s.getSmall(ctx, objLeaseIndex)
	if errors.Is(err, store.ErrObjectNotFound) {
		return leaseIndex{}, fi.ETag, nil
	}
	if err != nil {
		return leaseIndex{}, "", fmt.Errorf("read lease index: %w", err)
	}
	var idx leaseIndex
	if err := json.Unmarshal(b, &idx); err != nil {
		s.logger.Warn("lease index unreadable; rewriting it", "error", err)
		return leaseIndex{Seq: idx.Seq}, fi.ETag, nil
	}
	return idx, fi.ETag, nil
}

// updateLeaseIndex applies change to the index's names with a
// compare-and-swap, retrying when another client changed it meanwhile,
// until ctx ends. Without a Swapper there is no index, and nothing to do.
func (s *engine) updateLeaseIndex(ctx context.Context, change func([]string) []string) error {
	if s.swapper == nil {
		return nil
	}
	for try := 0; ; try++ {
		idx, etag, err := s.readLeaseIndex(ctx)
		if err != nil {
			return err
		}
		next := change(slices.Clone(idx.Leases))
		if slices.Equal(next, idx.Leases) {
			return nil
		}
		b, _ := json.Marshal(leaseIndex{Seq: idx.Seq + 1, Leases: next})
		_, err = s.swapper.PutIfMatch(ctx, objLeaseIndex, b, etag)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrObjectChanged) && !errors.Is(err, store.ErrObjectExists) && !errors.Is(err, store.ErrObjectNotFound) {
			return fmt.Errorf("write lease index: %w", err)
		}
		// Another client won this round: back off a little, jittered.
		d := time.Duration(1+rand.IntN(10*min(try+1, 10))) * time.Millisecond
		select {
		case <-ctx.Done():
			return fmt.Errorf("write lease index: %w", context.Cause(ctx))
		case <-time.After(d):
		}
	}
}

// indexLease adds the lease name to the index (if not there already).
func (s *engine) indexLease(ctx context.Context, name string) error {
	return s.updateLeaseIndex(ctx, func(names []string) []string {
		if slices.Contains(names, name) {
			return names
		}
		return append(names, name)
	})
}

// unindexLeases removes names from the index.
func (s *engine) unindexLeases(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	return s.updateLeaseIndex(ctx, func(cur []string) []string {
		return slices.DeleteFunc(cur, func(n string) bool { return slices.Contains(names, n) })
	})
}

// indexedLeases reads every lease the index names (except those in skip,
// already judged) by key and returns the live ones and the expired ones at
// server time now. Entries whose lease is gone or expired are dropped from
// the index (best effort: the next GC drops them otherwise).
func (s *engine) indexedLeases(ctx context.Context, now time.Time, skip map[string]bool) (busy, expired []string, err error) {
	if s.swapper == nil {
		return nil, nil, nil
	}
	idx, _, err := s.readLeaseIndex(ctx)
	if err != nil {
		return nil, nil, err
	}
	var drop []string
	for _, name := range idx.Leases {
		if skip[name] {
			continue
		}
		fi, err := s.backend.Stat(ctx, name)
		switch {
		case errors.Is(err, store.ErrObjectNotFound):
			drop = append(drop, name)
		case err != nil:
			return nil, nil, fmt.Errorf("read lease %s: %w", name, err)
		case !s.live(fi.Modified, now):
			expired = append(expired, name)
			drop = append(drop, name)
		default:
			busy = append(busy, name)
		}
	}
	if err := s.unindexLeases(ctx, drop); err != nil {
		s.logger.Debug("lease index cleanup failed", "error", err)
	}
	return busy, expired, nil
}
