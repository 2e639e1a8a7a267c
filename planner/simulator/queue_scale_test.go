package simulator

import (
	"fmt"
	"testing"

	"github.com/shoenig/test/must"
)

// TestTimeQueueRound runs the queue scale round small: it decides, places
// and reclaims for the late queues.
func TestTimeQueueRound(t *testing.T) {
	d, whole, reclaimed, err := TimeQueueRound("fifo", 2000, 20, 200, 1)
	must.NoError(t, err)
	must.Positive(t, d)
	must.Positive(t, whole)
	must.Positive(t, reclaimed)
}

// BenchmarkQueueRound is one planning round with queues (gangs and reclaim
// on, 1,000 queues on 32,000 nodes x 4 GPUs) at 25k, 50k and 100k jobs
// under fifo and goodput (the goal: under 1 s at 100k, growing
// linearly). With -short (make bench-smoke) one small size only.
func BenchmarkQueueRound(b *testing.B) {
	type size struct{ jobs, queues, nodes int }
	sizes := []size{{25000, 1000, 32000}, {50000, 1000, 32000}, {100000, 1000, 32000}}
	if testing.Short() {
		sizes = []size{{2000, 20, 640}}
	}
	for _, p := range []string{"fifo", "goodput"} {
		for _, sz := range sizes {
			b.Run(fmt.Sprintf("%s/jobs=%d", p, sz.jobs), func(b *testing.B) {
				r, err := NewQueueScaleRound(p, sz.jobs, sz.queues, sz.nodes)
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if err := r.Run(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
