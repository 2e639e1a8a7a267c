package history

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// TestTimeSlice_QueueKey: a waiting job queues from when it began to wait;
// a running one is protected (a century before the anchor) inside its
// quantum, when pinned, or without a quantum; past its quantum it queues
// from the start of its current slice.
func TestTimeSlice_QueueKey(t *testing.T) {
	const q = 100 * time.Second
	anchor := sec(5)
	cases := []struct {
		name string
		ts   TimeSlice
		now  float64
		want time.Time
	}{
		{"waiting", TimeSlice{Waiting: sec(40), Resumed: sec(10), Quantum: q}, 500, sec(40)},
		{"inside its quantum", TimeSlice{Running: true, Resumed: sec(10), Quantum: q}, 109, Protected(anchor)},
		{"pinned", TimeSlice{Running: true, Pinned: true, Resumed: sec(10), Quantum: q}, 500, Protected(anchor)},
		{"no quantum", TimeSlice{Running: true, Resumed: sec(10)}, 500, Protected(anchor)},
		{"at its quantum's end", TimeSlice{Running: true, Resumed: sec(10), Quantum: q}, 110, sec(110)},
		{"three slices in", TimeSlice{Running: true, Resumed: sec(10), Quantum: q}, 399, sec(310)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, tc.ts.QueueKey(anchor, sec(tc.now)))
		})
	}
	must.Eq(t, time.Date(1926, 1, 1, 0, 0, 5, 0, time.UTC), Protected(anchor))
}
