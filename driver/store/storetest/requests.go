package storetest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
)

// counting wraps a Backend and counts the requests a commit makes on
// chunk objects.
type counting struct {
	store.Backend
	stats, puts, creates atomic.Int64 // Stat; Put; Put with ifAbsent
}

func (c *counting) Stat(ctx context.Context, name string) (store.ObjectInfo, error) {
	if strings.HasPrefix(name, "chunks/") {
		c.stats.Add(1)
	}
	return c.Backend.Stat(ctx, name)
}

func (c *counting) Put(ctx context.Context, name string, data []byte, ifAbsent bool) error {
	if strings.HasPrefix(name, "chunks/") {
		if ifAbsent {
			c.creates.Add(1)
		} else {
			c.puts.Add(1)
		}
	}
	return c.Backend.Put(ctx, name, data, ifAbsent)
}

// Unwrap implements store.Unwrapper (compare-and-swap and touch pass
// through uncounted).
func (c *counting) Unwrap() store.Backend { return c.Backend }

// take returns the counts since the last take and zeroes them.
func (c *counting) take() (stats, puts, creates int64) {
	return c.stats.Swap(0), c.puts.Swap(0), c.creates.Swap(0)
}

// testNewChunksNeedNoLookup checks which requests a commit makes per chunk
// (one worker, so in the chunks' order): chunks no manifest of the key
// names are looked up until createAfterMisses (8) lookups in a row found
// nothing, then created at once without a lookup; a refused create (the
// chunk is there) sends the commit back to lookups; chunks the key's
// newest manifest names are looked up, and not uploaded when there.
func testNewChunksNeedNoLookup(t *testing.T, nb NewBackend) {
	c := &counting{Backend: nb(t)}
	o := Options()
	o.Workers = 1
	s := openWith(t, c, o)
	const chunks = 30 // sub/opt.bin is the first 10 of them
	data := randomBytes(t, chunks*ChunkSize)

	_, st := commit(t, s, key("a"), data)
	stats, puts, creates := c.take()
	must.Eq(t, int64(chunks*ChunkSize), st.NewBytes)
	must.Eq(t, int64(8), stats, must.Sprint("the first 8 new chunks are looked up"))
	must.Eq(t, int64(8), puts)
	must.Eq(t, int64(chunks-8), creates, must.Sprint("the rest are created without a lookup"))

	for ch := 20; ch < 23; ch++ {
		copy(data[ch*ChunkSize:], randomBytes(t, ChunkSize))
	}
	_, st = commit(t, s, key("a"), data)
	stats, puts, creates = c.take()
	must.Eq(t, int64(3*ChunkSize), st.NewBytes)
	must.Eq(t, int64(chunks), stats, must.Sprint("named chunks, and new ones until 8 missed, are looked up"))
	must.Eq(t, int64(3), puts)
	must.Zero(t, creates)

	// Another key with the same bytes: no manifest of its own names them,
	// and each lookup finds the chunk: nothing is sent again.
	_, st = commit(t, s, key("b"), data)
	stats, puts, creates = c.take()
	must.Eq(t, int64(0), st.NewBytes)
	must.Eq(t, int64(chunks), stats)
	must.Zero(t, puts)
	must.Zero(t, creates)
	_, dst := restore(t, s, key("b"))
	sameTree(t, dst, data)

	// 10 new chunks, then the 20 last of data, which are there: 8 lookups
	// miss, the 9th and 10th chunks are created, the 11th's create is
	// refused, and every later chunk is looked up (and found).
	mixed := append(randomBytes(t, 10*ChunkSize), data[10*ChunkSize:]...)
	_, st = commit(t, s, key("c"), mixed)
	stats, puts, creates = c.take()
	must.Eq(t, int64(10*ChunkSize), st.NewBytes)
	must.Eq(t, int64(3), creates)
	must.Eq(t, int64(8), puts)
	must.Eq(t, int64(8+20), stats)
	_, dst = restore(t, s, key("c"))
	sameTree(t, dst, mixed)
}
