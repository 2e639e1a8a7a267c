package driver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/caravan-nomad/caravan/driver/protocol"
	"github.com/caravan-nomad/caravan/driver/store"
)

// Writer leases tell a restore that another allocation is about to write,
// or is writing, a newer generation of the same checkpoint key: Nomad does
// not make a new allocation wait for the old one's poststop commit (a scale
// to 0 and back, driver/README.md). A lease is a small file per key and
// allocation in the store's shared directory, beside the keys
// (<store>/.writers/<sha256 of the key>/<alloc ID>.json; the store skips
// dot-directories), renewed while its writer works:
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
// lease may be before it is ignored as abandoned.
var (
	leaseRenew = 2 * time.Second
	leaseTTL   = 15 * time.Second
)

// leasesDir is the store's directory of writer leases.
const leasesDir = ".writers"

// maxLeaseSize bounds a lease file read back.
const maxLeaseSize = 4 << 10

// lease is one lease file's content.
type lease struct {
	Key     string    `json:"key"`
	AllocID string    `json:"alloc_id"`
	Node    string    `json:"node"`
	State   string    `json:"state"`
	Renewed time.Time `json:"renewed"`
}

// keyLeases are the writer leases of one key.
type keyLeases struct {
	dir string
	key store.Key
}

// leasesOf returns the lease directory of key in st; an error when the
// store has no local shared directory to hold leases.
func leasesOf(st *store.Store, key store.Key) (keyLeases, error) {
	root := st.Root()
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return keyLeases{}, fmt.Errorf("writer leases: store root %q is not a directory", root)
	}
	sum := sha256.Sum256([]byte(key.String()))
	return keyLeases{dir: filepath.Join(root, leasesDir, hex.EncodeToString(sum[:16])), key: key}, nil
}

func (l keyLeases) path(allocID string) string {
	return filepath.Join(l.dir, allocID+".json")
}

// put writes (or renews) allocID's lease in state.
func (l keyLeases) put(allocID, node, state string) error {
	if allocID == "" || strings.ContainsAny(allocID, `/\`) || strings.HasPrefix(allocID, ".") {
		return fmt.Errorf("writer lease: bad allocation ID %q", allocID)
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return fmt.Errorf("writer lease: %w", err)
	}
	b, err := json.Marshal(lease{Key: l.key.String(), AllocID: allocID, Node: node, State: state, Renewed: time.Now().UTC()})
	if err != nil {
		return err
	}
	if err := protocol.WriteFileAtomic(l.path(allocID), b); err != nil {
		return fmt.Errorf("writer lease: %w", err)
	}
	return nil
}

// drop deletes allocID's lease (gone already is fine).
func (l keyLeases) drop(allocID string) error {
	if err := os.Remove(l.path(allocID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("writer lease: %w", err)
	}
	return nil
}

// others are the leases of allocations other than allocID, oldest renewal
// first. Unreadable lease files are skipped (a torn write cannot happen:
// they are renamed into place).
func (l keyLeases) others(allocID string) ([]lease, error) {
	ents, err := os.ReadDir(l.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("writer leases: %w", err)
	}
	var out []lease
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") ||
			strings.TrimSuffix(name, ".json") == allocID {
			continue
		}
		if ls, ok := readLease(filepath.Join(l.dir, name)); ok && ls.Key == l.key.String() {
			out = append(out, ls)
		}
	}
	slices.SortFunc(out, func(a, b lease) int { return a.Renewed.Compare(b.Renewed) })
	return out, nil
}

func readLease(path string) (lease, bool) {
	f, err := os.Open(path)
	if err != nil {
		return lease{}, false
	}
	defer f.Close()
	b := make([]byte, maxLeaseSize+1)
	n, _ := f.Read(b)
	var ls lease
	if n > maxLeaseSize || json.Unmarshal(b[:n], &ls) != nil {
		return lease{}, false
	}
	return ls, true
}

// blocking reports whether ls holds a restore back: a commit in flight or
// handed to a poststop task always; a running writer only with scope
// "alloc", where it is the same slot's predecessor (with scope "group" the
// group's other running members share the key and never stop writing).
func (ls lease) blocking(scope string, now time.Time) (block, stale bool) {
	if now.Sub(ls.Renewed) > leaseTTL {
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
// out is ignored with an event naming its allocation. Without a lease
// directory it says so in an event and waits for nothing.
func (d *Driver) waitLeases(cfg *drivers.TaskConfig, cc *CheckpointConfig, key store.Key, wait time.Duration, events *taskEmitter) error {
	st, err := d.checkpointStore()
	if err != nil {
		return nil // the restore itself reports it
	}
	l, err := leasesOf(st, key)
	if err != nil {
		events.emit(map[string]string{annotationReason: "restore"},
			"Cannot check for a commit in flight (%v); restoring the newest generation now", err)
		return nil
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

func awaitLeases(ctx context.Context, watches []leaseWatch, self string, wait time.Duration, events *taskEmitter) error {
	ctx, cancel := context.WithTimeout(ctx, max(wait, 0))
	defer cancel()
	announced, ignored := false, map[string]bool{}
	for {
		var busy, keys []string
		now := time.Now()
		for _, w := range watches {
			ls, err := w.l.others(self)
			if err != nil {
				return fmt.Errorf("checkpoint.wait_timeout: %w", err)
			}
			n := len(busy)
			for _, x := range ls {
				block, stale := x.blocking(w.scope, now)
				if stale && !ignored[x.AllocID] {
					ignored[x.AllocID] = true
					events.emit(map[string]string{annotationReason: "restore"},
						"Allocation %s did not finish its checkpoint commit (writer lease %q last renewed %s ago on %s); restoring the newest generation",
						x.AllocID, x.State, now.Sub(x.Renewed).Round(time.Second), x.Node)
				}
				if block {
					busy = append(busy, fmt.Sprintf("%s (%s)", x.AllocID, x.State))
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
