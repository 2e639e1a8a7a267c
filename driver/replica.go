package driver

import (
	"strconv"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/caravan-nomad/caravan/driver/store"
)

// Scope "replica" is for data-parallel jobs whose every allocation index
// holds the whole (replicated) state, as each worker of the elastic PyTorch
// container job does. Each index commits to its own key, as with scope
// "alloc" (workers stopping together never race for one key, and a new
// worker's restore need not wait for the running ones), but a restore takes
// the newest checkpoint of any index of the group, never its own index's
// older one: after a scale-down the highest indexes stop first, so the
// newest state is often under another index than the one a resume lands on.

// replicaKeys are the keys in st of key's replicas: the same namespace,
// job, incarnation, group and task, any allocation index (key itself
// included, listed or not).
func replicaKeys(st *store.Store, key store.Key) ([]store.Key, error) {
	all, err := st.Keys()
	if err != nil {
		return nil, err
	}
	out := []store.Key{key}
	for _, k := range all {
		if k.Shared || k.Index == key.Index || k.Namespace != key.Namespace || k.Job != key.Job ||
			k.Incarnation != key.Incarnation || k.Group != key.Group || k.Task != key.Task {
			continue
		}
		out = append(out, k)
	}
	return out, nil
}

// newestReplica returns the replica of key whose newest generation is the
// furthest in training (the highest step; without steps on both sides, the
// newer commit), and floor, the highest marker sequence any replica's newest
// generation carries: the restored marker is raised to it, so the task's
// next marker is newer than every index's (its own key's included).
func newestReplica(st *store.Store, key store.Key, logger hclog.Logger) (src store.Key, floor uint64, err error) {
	keys, err := replicaKeys(st, key)
	if err != nil {
		return key, 0, err
	}
	src = key
	var best *store.Manifest
	for _, k := range keys {
		m, err := st.Latest(k)
		if err != nil {
			logger.Debug("replica without a readable generation", "key", k.String(), "error", err)
			continue
		}
		if seq, ok := parseSeq(m.Meta); ok {
			floor = max(floor, seq)
		}
		if best == nil || furtherThan(m, best) {
			src, best = k, m
		}
	}
	return src, floor, nil
}

// furtherThan reports whether a is further in training than b: a higher
// step, or with no steps to compare, a later commit.
func furtherThan(a, b *store.Manifest) bool {
	sa, errA := strconv.ParseUint(a.Meta[store.MetaStep], 10, 64)
	sb, errB := strconv.ParseUint(b.Meta[store.MetaStep], 10, 64)
	if errA == nil && errB == nil && sa != sb {
		return sa > sb
	}
	return a.Created.After(b.Created)
}

// replicaLeases are the writer leases of key's other replicas: a commit in
// flight there holds a restore back; a running member does not (it is a
// live worker of the group, as with scope "group").
func replicaLeases(st *store.Store, key store.Key) []leaseWatch {
	keys, err := replicaKeys(st, key)
	if err != nil {
		return nil
	}
	var out []leaseWatch
	for _, k := range keys[1:] {
		if l, err := leasesOf(st, k); err == nil {
			out = append(out, leaseWatch{l, ScopeGroup})
		}
	}
	return out
}
