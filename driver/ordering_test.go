package driver

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/protocol"
	"github.com/caravan-nomad/caravan/driver/store"
)

// memberCheckpointer is a checkpointer of one group member committing to st
// under groupKey, without a task: commit is called with markers directly.
func memberCheckpointer(t *testing.T, st *store.Store, allocID string) *checkpointer {
	t.Helper()
	taskDir := t.TempDir()
	dir := filepath.Join(taskDir, "local", checkpointDirName)
	must.NoError(t, os.MkdirAll(dir, 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(dir, "state"), []byte(allocID), 0o644))
	cdir, err := newCkptDir(taskDir, dir)
	must.NoError(t, err)
	cfg := defaultCheckpoint()
	must.NoError(t, cfg.validate()) // parses the timeout
	return &checkpointer{
		logger:  hclog.NewNullLogger(),
		store:   func() (*store.Store, error) { return st, nil },
		key:     groupKey,
		dir:     dir,
		cdir:    cdir,
		node:    allocID,
		allocID: allocID,
		cfg:     cfg,
		metrics: newDriverMetrics(),
		sem:     make(chan struct{}, 1),
	}
}

func u64(n uint64) *uint64 { return &n }

// TestCheckpoint_MetaCannotPoisonOrdering: a group member whose marker meta
// claims step 2^64-1 (or any of the driver's meta keys) does not hold the
// group's later checkpoints back: the store orders by the marker's own
// sequence and step only, and the task's look-alikes are not stored.
func TestCheckpoint_MetaCannotPoisonOrdering(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	a := memberCheckpointer(t, st, "alloc-a")
	b := memberCheckpointer(t, st, "alloc-b")

	poison := &protocol.Marker{Sequence: 1, Meta: map[string]string{
		"step": "18446744073709551615", "sequence": "9999", "alloc_id": "forged", "reason": "forged", "loss": "0.5",
	}}
	must.NoError(t, a.commit(ctx, poison, reasonPeriodic, 0))
	m, err := st.Latest(groupKey)
	must.NoError(t, err)
	must.MapNotContainsKey(t, m.Meta, store.MetaStep)
	must.Eq(t, "1", m.Meta[store.MetaSequence])
	must.Eq(t, "alloc-a", m.Meta[metaAllocID])
	must.Eq(t, reasonPeriodic, m.Meta[metaReason])
	must.Eq(t, "0.5", m.Meta["loss"], must.Sprint("the task's own meta is kept"))

	// The other member's real checkpoints are committed, not refused as
	// stale behind a step the marker never had.
	for i, step := range []uint64{10, 20} {
		must.NoError(t, b.commit(ctx, &protocol.Marker{Sequence: uint64(i + 1), Step: u64(step)}, reasonPeriodic, 0))
		must.Eq(t, uint64(i+2), b.lastGen.Load(), must.Sprintf("member b's step %d was not committed", step))
	}
	// And a real step from the first member is ordered against them.
	must.NoError(t, a.commit(ctx, &protocol.Marker{Sequence: 2, Step: u64(15)}, reasonPeriodic, 0))
	m, err = st.Latest(groupKey)
	must.NoError(t, err)
	must.Eq(t, "20", m.Meta[store.MetaStep], must.Sprint("step 15 after step 20 is stale"))
}

// TestManifestMeta: the driver's keys always come from the marker's fields.
func TestManifestMeta(t *testing.T) {
	cases := []struct {
		name        string
		marker      protocol.Marker
		wantStep    string
		wantDropped []string
	}{
		{"no meta, no step", protocol.Marker{Sequence: 3}, "", nil},
		{"step from the marker", protocol.Marker{Sequence: 3, Step: u64(7)}, "7", nil},
		{"meta step without marker step", protocol.Marker{Sequence: 3, Meta: map[string]string{"step": "99"}}, "", []string{"step"}},
		{"meta step beside marker step", protocol.Marker{Sequence: 3, Step: u64(7), Meta: map[string]string{"step": "99"}}, "7", []string{"step"}},
		{"every driver key", protocol.Marker{Sequence: 3, Meta: map[string]string{"reason": "x", "alloc_id": "y", "sequence": "1", "step": "2"}},
			"", []string{"alloc_id", "reason", "sequence", "step"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			meta, dropped := manifestMeta(&tc.marker, "alloc", reasonStop)
			must.Eq(t, tc.wantDropped, dropped)
			must.Eq(t, tc.wantStep, meta[store.MetaStep])
			_, has := meta[store.MetaStep]
			must.Eq(t, tc.wantStep != "", has)
			must.Eq(t, "3", meta[store.MetaSequence])
			must.Eq(t, "alloc", meta[metaAllocID])
			must.Eq(t, reasonStop, meta[metaReason])
		})
	}
}

// TestOrderingBoundsAgree: the store orders by exactly the range the
// protocol accepts.
func TestOrderingBoundsAgree(t *testing.T) {
	must.Eq(t, uint64(protocol.MaxStep), uint64(store.MaxOrderValue))
	must.Eq(t, uint64(protocol.MaxSequence), uint64(store.MaxOrderValue))
}
