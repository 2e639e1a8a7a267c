package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
)

// NewStores returns two handles on one fresh, empty store, as two clients
// (two hosts, two plugins) open it.
type NewStores func(t *testing.T) (*store.Store, *store.Store)

// testWriterLeases runs RunWriterLeases on the backend.
func testWriterLeases(t *testing.T, nb NewBackend) {
	RunWriterLeases(t, func(t *testing.T) (*store.Store, *store.Store) {
		b := nb(t)
		return open(t, b), open(t, b)
	})
}

// RunWriterLeases checks a store's writer leases, which every engine
// keeps (the directory store's test runs it on store.Open; Run on every
// object backend): what one client writes, renews and drops, another
// reads, per key and holder, with its age; bad holders are refused; the
// leases leave keys, commits, restores and GC alone.
func RunWriterLeases(t *testing.T, ns NewStores) {
	a, b := ns(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k, other := key("writers"), key("writers-other")

	got, err := b.WriterLeases(ctx, k)
	must.NoError(t, err)
	must.SliceEmpty(t, got)

	must.NoError(t, a.PutWriterLease(ctx, k, "alloc-a", "node1", "running"))
	must.NoError(t, a.PutWriterLease(ctx, other, "alloc-c", "node3", "committing"))
	got, err = b.WriterLeases(ctx, k)
	must.NoError(t, err)
	must.Len(t, 1, got)
	must.Eq(t, "alloc-a", got[0].Holder)
	must.Eq(t, "node1", got[0].Node)
	must.Eq(t, "running", got[0].State)
	// Just written: young (the object store's clock has whole seconds).
	must.Between(t, -time.Second, got[0].Age, 10*time.Second)

	// A renewal with a new state replaces the lease; a second holder adds
	// one.
	must.NoError(t, a.PutWriterLease(ctx, k, "alloc-a", "node1", "committing"))
	must.NoError(t, b.PutWriterLease(ctx, k, "alloc-b", "node2", "running"))
	got, err = a.WriterLeases(ctx, k)
	must.NoError(t, err)
	states := map[string]string{}
	for _, l := range got {
		states[l.Holder] = l.State
	}
	must.Eq(t, map[string]string{"alloc-a": "committing", "alloc-b": "running"}, states)

	// The leases are invisible to the store's own work.
	keys, err := a.Keys()
	must.NoError(t, err)
	must.SliceEmpty(t, keys)
	data := randomBytes(t, 3*ChunkSize)
	commit(t, a, k, data)
	dst := t.TempDir()
	_, err = b.Restore(ctx, k, dst)
	must.NoError(t, err)
	sameTree(t, dst, data)
	must.NoError(t, b.GC(k))
	got, err = b.WriterLeases(ctx, k)
	must.NoError(t, err)
	must.Len(t, 2, got, must.Sprint("GC deleted a writer lease"))

	// Dropped by its holder (twice is fine, and so is one never held).
	must.NoError(t, a.DropWriterLease(ctx, k, "alloc-a"))
	must.NoError(t, a.DropWriterLease(ctx, k, "alloc-a"))
	must.NoError(t, a.DropWriterLease(ctx, k, "never-held"))
	got, err = b.WriterLeases(ctx, k)
	must.NoError(t, err)
	must.Len(t, 1, got)
	must.Eq(t, "alloc-b", got[0].Holder)
	got, err = b.WriterLeases(ctx, other)
	must.NoError(t, err)
	must.Len(t, 1, got)
	must.Eq(t, "alloc-c", got[0].Holder)

	for _, bad := range []string{"", "../x", "a/b", `a\b`, ".hidden", "nul\x00"} {
		must.ErrorIs(t, a.PutWriterLease(ctx, k, bad, "n", "running"), store.ErrInvalid, must.Sprintf("%q", bad))
		must.ErrorIs(t, a.DropWriterLease(ctx, k, bad), store.ErrInvalid, must.Sprintf("%q", bad))
	}
	must.ErrorIs(t, a.PutWriterLease(ctx, store.Key{}, "alloc-a", "n", "running"), store.ErrInvalid)
}
