package queue

import (
	"fmt"
	"math/bits"
	"sort"
)

// Guarantees is how the configured guarantees fit the live cluster in a
// round (milli-GPUs).
type Guarantees struct {
	// Capacity is the live cluster's GPUs (the ready nodes the round saw).
	Capacity int `json:"capacity_gpu_milli"`
	// Configured is the sum of the guarantees as configured.
	Configured int `json:"configured_gpu_milli"`
	// Effective is the sum of the guarantees in force: Configured when it
	// fits Capacity, else exactly Capacity.
	Effective int `json:"effective_gpu_milli"`
	// Shortfall is how much Configured exceeds Capacity (0 when it fits).
	Shortfall int `json:"shortfall_gpu_milli"`
	// Note says why the guarantees in force differ from the configured
	// ones ("" when they do not).
	Note string `json:"note,omitempty"`
}

// Scaled reports whether the round scaled the guarantees down.
func (g Guarantees) Scaled() bool { return g.Shortfall > 0 }

// EffectiveGuarantees returns the guarantee each queue of qs has on a
// cluster of capacity milli-GPUs, in the order of qs, and how they fit.
//
// Guarantees that add up to more than the live cluster (a node lost,
// drained or in maintenance) are a normal state, not a config error. They
// are then scaled in proportion, as YARN's capacity scheduler states them
// as shares of the live cluster: each queue keeps its share of the sum of
// the guarantees, floor(g*capacity/sum) milli-GPUs, and the milli-GPUs
// the rounding leaves go one each to the largest remainders (ties: the
// queue listed first). The scaled guarantees add up to exactly capacity,
// never more. Guarantees that fit are used as configured.
func EffectiveGuarantees(qs []Queue, capacity int) ([]int, Guarantees) {
	out := make([]int, len(qs))
	g := Guarantees{Capacity: max(capacity, 0)}
	for i, q := range qs {
		out[i] = max(q.Guarantee, 0)
		g.Configured += out[i]
	}
	g.Effective = g.Configured
	if g.Configured <= g.Capacity {
		return out, g
	}
	g.Shortfall = g.Configured - g.Capacity
	rems := make([]uint64, len(qs))
	left := g.Capacity
	for i, v := range out {
		// v*capacity/sum exactly: the product may pass 63 bits.
		hi, lo := bits.Mul64(uint64(v), uint64(g.Capacity))
		quo, rem := bits.Div64(hi, lo, uint64(g.Configured))
		out[i], rems[i] = int(quo), rem
		left -= out[i]
	}
	order := make([]int, len(qs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return rems[order[a]] > rems[order[b]] })
	for _, i := range order {
		if left == 0 {
			break
		}
		if rems[i] > 0 {
			out[i]++
			left--
		}
	}
	g.Effective = g.Capacity
	g.Note = fmt.Sprintf("the guarantees add up to %s GPUs, more than the live cluster's %s (ready nodes): "+
		"each queue's guarantee is scaled to its share of the live cluster (x%.3f), %s GPUs in all, until the capacity returns",
		gpus(g.Configured), gpus(g.Capacity), float64(g.Capacity)/float64(g.Configured), gpus(g.Effective))
	return out, g
}
