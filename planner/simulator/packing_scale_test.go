package simulator

import (
	"fmt"
	"testing"

	"github.com/caravan-nomad/caravan/planner/packing"
	"github.com/shoenig/test/must"
)

// TestPackingScaleRound runs the packing scale round small: it judges the
// packed GPUs (some unpack), admits waiting jobs and leaves others waiting.
func TestPackingScaleRound(t *testing.T) {
	in := PackingScaleInput(2000, 20, 200)
	p, err := packing.Decide(packing.DefaultConfig(), in)
	must.NoError(t, err)
	kinds := map[packing.Kind]int{}
	for _, d := range p.Decisions {
		kinds[d.Kind]++
	}
	must.Positive(t, kinds[packing.Keep])
	must.Positive(t, kinds[packing.Migrate]+kinds[packing.Suspend])
	must.Positive(t, kinds[packing.Admit])
	must.Positive(t, kinds[packing.Wait])
}

// BenchmarkPackingRound is one planning round with packing on at 25k, 50k
// and 100k jobs in 1,000 queues on 32,000 nodes x 4 GPUs (issue 31: under
// 1 s at 100k jobs, measured like `simulate --queue-scale`): "packing" is
// the packing decision alone on PackingScaleInput's steady state; "queues+
// packing" the queue round (BenchmarkQueueRound's, fifo) followed by it.
// With -short (make bench-smoke) one small size only.
func BenchmarkPackingRound(b *testing.B) {
	type size struct{ jobs, queues, nodes int }
	sizes := []size{{25000, 1000, 32000}, {50000, 1000, 32000}, {100000, 1000, 32000}}
	if testing.Short() {
		sizes = []size{{2000, 20, 640}}
	}
	for _, sz := range sizes {
		in := PackingScaleInput(sz.jobs, sz.queues, sz.nodes)
		b.Run(fmt.Sprintf("packing/jobs=%d", sz.jobs), func(b *testing.B) {
			for b.Loop() {
				if _, err := packing.Decide(packing.DefaultConfig(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
		r, err := NewQueueScaleRound("fifo", sz.jobs, sz.queues, sz.nodes)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("queues+packing/jobs=%d", sz.jobs), func(b *testing.B) {
			for b.Loop() {
				if err := r.Run(); err != nil {
					b.Fatal(err)
				}
				if _, err := packing.Decide(packing.DefaultConfig(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
