package driver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/caravan-nomad/caravan/driver/store"
)

// Writer leases tell a restore that another allocation is about to write,
// or is writing, a newer generation of the same checkpoint key: Nomad does
// not make a new allocation wait for the old one's poststop commit (a scale
// to 0 and back, driver/README.md). A lease is a small record per key and
// allocation that the checkpoint store keeps, whatever its kind (a
// directory: <store>/.writers/<hash of the key>/<alloc ID>.json; S3:
// writers/<hash of the key>/<alloc ID>.json below the prefix; see
// store.PutWriterLease), renewed while its writer works:
//
//   - leaseRunning: a checkpoint sidecar's allocation is running, so its
//     main task may still write a checkpoint on its kill signal;
//   - leaseCommitting: a sidecar or poststop commit is in flight;
//   - leaseStopping: the sidecar stopped, handing the key to the poststop
//     commit task of its allocation (which deletes the lease when done).
//
// A lease not renewed within leaseTTL belongs to a writer that died (a lost
// node, a killed plugin): it is ignored with an event.

const (
	leaseRunning    = "running"
	leaseCommitting = "committing"
	leaseStopping   = "stopping"
)

// leaseRenew is how often a writer renews its lease; leaseTTL is how old a
// lease may be before it is ignored as abandoned; leaseOpTimeout bounds
// one write or read of the leases.
var (
	leaseRenew     = 2 * time.Second
	leaseTTL       = 15 * time.Second
	leaseOpTimeout = 10 * time.Second
)

// lease is one writer lease as the store reads it.
type lease = store.WriterLease

// keyLeases are the writer leases of one key in the store.
type keyLeases struct {
	st  *store.Store
	key store.Key
}

// leasesOf returns the writer leases of key in st (every kind of store
// keeps them); an error only for a key the store refuses.
func leasesOf(st *store.Store, key store.Key) (keyLeases, error) {
	if err := key.Validate(); err != nil {
		return keyLeases{}, fmt.Errorf("writer leases: %w", err)
	}
	return keyLeases{st: st, key: key}, nil
}

// put writes (or renews) allocID's lease in state.
func (l keyLeases) put(allocID, node, state string) error {
	ctx, cancel := context.WithTimeout(context.Background(), leaseOpTimeout)
	defer cancel()
	return l.st.PutWriterLease(ctx, l.key, allocID, node, state)
}

// drop deletes allocID's lease (gone already is fine).
func (l keyLeases) drop(allocID string) error {
	ctx, cancel := context.WithTimeout(context.Background(), leaseOpTimeout)
	defer cancel()
	return l.st.DropWriterLease(ctx, l.key, allocID)
}

// others are the leases of allocations other than allocID, oldest renewal
// first.
func (l keyLeases) others(ctx context.Context, allocID string) ([]lease, error) {
	ctx, cancel := context.WithTimeout(ctx, leaseOpTimeout)
	defer cancel()
	all, err := l.st.WriterLeases(ctx, l.key)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, ls := range all {
		if ls.Holder != allocID {
			out = append(out, ls)
		}
	}
	return out, nil
}

// blocking reports whether ls holds a restore back: a commit in flight or
// handed to a poststop task always; a running writer only with scope
// "alloc", where it is the same slot's predecessor (with scope "group" the
// group's other running members share the key and never stop writing).
func blocking(ls lease, scope string) (block, stale bool) {
	if ls.Age > leaseTTL {
		return false, true
	}
	if ls.State == leaseRunning && scope == ScopeGroup {
		return false, false
	}
	return true, false
}

// leasePoll is how often a restore looks at the key's leases while waiting.
var leasePoll = 200 * time.Millisecond

// waitLeases waits, at most wait, while another allocation holds a lease
// on key that blocks a restore (lease.blocking) or, with scope "replica",
// a commit lease on another index's key (replicaLeases); a lease that aged
// out is ignored with an event naming its allocation.
func (d *Driver) waitLeases(cfg *drivers.TaskConfig, cc *CheckpointConfig, key store.Key, wait time.Duration, events *taskEmitter) error {
	st, err := d.checkpointStore()
	if err != nil {
		return nil // the restore itself reports it
	}
	l, err := leasesOf(st, key)
	if err != nil {
		return err
	}
	watches := []leaseWatch{{l, cc.Scope}}
	if cc.Scope == ScopeReplica {
		watches = append(watches, replicaLeases(st, key)...)
	}
	return awaitLeases(d.ctx, watches, cfg.AllocID, wait, events)
}

// leaseWatch is one key's leases and the scope they block a restore under.
type leaseWatch struct {
	l     keyLeases
	scope string
}

func awaitLeases(parent context.Context, watches []leaseWatch, self string, wait time.Duration, events *taskEmitter) error {
	ctx, cancel := context.WithTimeout(parent, max(wait, 0))
	defer cancel()
	announced, ignored := false, map[string]bool{}
	for {
		var busy, keys []string
		for _, w := range watches {
			// Each read has its own bound: one that outlasts the wait
			// still answers.
			ls, err := w.l.others(parent, self)
			if err != nil {
				return fmt.Errorf("checkpoint.wait_timeout: %w", err)
			}
			n := len(busy)
			for _, x := range ls {
				block, stale := blocking(x, w.scope)
				if stale && !ignored[x.Holder] {
					ignored[x.Holder] = true
					events.emit(map[string]string{annotationReason: "restore"},
						"Allocation %s did not finish its checkpoint commit (writer lease %q last renewed %s ago on %s); restoring the newest generation",
						x.Holder, x.State, x.Age.Round(time.Second), x.Node)
				}
				if block {
					busy = append(busy, fmt.Sprintf("%s (%s)", x.Holder, x.State))
				}
			}
			if len(busy) > n {
				keys = append(keys, w.l.key.String())
			}
		}
		if len(busy) == 0 {
			return nil
		}
		if !announced {
			announced = true
			events.emit(map[string]string{annotationReason: "restore"},
				"Waiting for allocation %s to finish writing checkpoint %s", strings.Join(busy, ", "), strings.Join(keys, ", "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("checkpoint.wait_timeout: not restoring while allocation %s may still write a newer generation of %s",
				strings.Join(busy, ", "), strings.Join(keys, ", "))
		case <-time.After(leasePoll):
		}
	}
}
