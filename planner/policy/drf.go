package policy

import (
	"container/heap"
	"fmt"
)

// DRF is dominant-resource fair share (Optimus's baseline): after every
// admitted job gets its minimum, units go one at a time to the job with the
// smallest dominant share that is below its maximum (progressive filling).
type DRF struct{}

// NewDRF returns the DRF fair-share policy.
func NewDRF() *DRF { return &DRF{} }

// Name implements Policy.
func (*DRF) Name() string { return "drf" }

// Info implements Policy.
func (d *DRF) Info() Info {
	return Info{Name: d.Name(), Class: ClassDeclared,
		Summary: "dominant-resource fairness: minimums, then progressive filling by smallest dominant share"}
}

type shareItem struct {
	job   int
	share float64
	rank  int
}

type shareHeap []shareItem

func (h shareHeap) Len() int { return len(h) }
func (h shareHeap) Less(a, b int) bool {
	if h[a].share != h[b].share {
		return h[a].share < h[b].share
	}
	return h[a].rank < h[b].rank
}
func (h shareHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *shareHeap) Push(x any)   { *h = append(*h, x.(shareItem)) }
func (h *shareHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Allocate implements Policy.
func (d *DRF) Allocate(in Input) (Plan, error) {
	if err := Validate(in); err != nil {
		return Plan{}, err
	}
	order := fifoOrder(in.Jobs)
	sizes := make([]size, len(in.Jobs))
	free := admit(in, order, sizes)
	capacity := clusterTotals(in.Cluster)
	h := make(shareHeap, 0, len(order))
	for r, i := range order {
		if sizes[i].w > 0 {
			j := &in.Jobs[i]
			h = append(h, shareItem{job: i, share: float64(sizes[i].w) * capacity.share(j.Worker), rank: r})
		}
	}
	heap.Init(&h)
	for h.Len() > 0 {
		it := heap.Pop(&h).(shareItem)
		j := &in.Jobs[it.job]
		s := &sizes[it.job]
		if s.w >= j.maxWorkers() || !free.fits(j.Worker, 1) {
			continue
		}
		free.sub(j.Worker, 1)
		s.w++
		it.share = float64(s.w) * capacity.share(j.Worker)
		s.reason = fmt.Sprintf("fair share: %d workers, dominant share %.4f", s.w, it.share)
		heap.Push(&h, it)
	}
	return finish(d.Name(), in, sizes, order), nil
}
