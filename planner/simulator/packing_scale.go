package simulator

import (
	"fmt"

	"github.com/caravan-nomad/caravan/planner/packing"
)

// PackingScaleInput is a packing round at scale, built from
// QueueScaleInput's jobs (so the sizes match `--queue-scale`'s round):
// GPUs of 4 shares on nodes x 4 GPUs, each job declaring 1 to 4 shares per
// worker; jobs in order run first-fit (packed where shares fit) until three
// quarters of the GPUs hold work, measured alone (solo 100 samples/s) or
// packed at ratios from 0.4 to 1.0 of that (some pairs lose, most gain),
// and the rest wait. Every tenth job opts out of packing.
func PackingScaleInput(jobs, queues, nodes int) packing.Input {
	in, _, _, _ := QueueScaleInput(jobs, queues, nodes)
	out := packing.Input{GPUs: make([]packing.GPU, nodes*4)}
	for g := range out.GPUs {
		out.GPUs[g] = packing.GPU{ID: fmt.Sprintf("gpu-%06d", g), Shares: 4, MPS: g%2 == 0}
	}
	used := make([]int, len(out.GPUs))
	limit := len(out.GPUs) * 3 / 4
	budget, cursor := limit*4*2/3, 0 // shares the running jobs hold at most
	for i, pj := range in.Jobs {
		j := packing.FromPolicy(pj, 4)
		j.Shares, j.Declared, j.Never = 1+i%4, 1+i%4, i%10 == 9
		if budget < j.Workers*j.Shares {
			out.Jobs = append(out.Jobs, j)
			continue
		}
		if gpus := firstFit(used[:limit], cursor, j.Workers, j.Shares); gpus != nil {
			budget -= j.Workers * j.Shares
			j.GPUs, j.Placed, j.Solo = gpus, int64(i), 100
			for _, g := range gpus {
				if used[g] > j.Shares {
					j.Packed, j.PackedRounds = 40+float64(i%61), 3 // packed next to an earlier job
				}
			}
			if i%7 == 0 {
				j.History, j.HistoryN = 0.6+0.4*float64(i%5)/4, 2
			}
			cursor = (cursor + max(1, j.Workers/2)) % limit // the next job overlaps this one's second half
		}
		out.Jobs = append(out.Jobs, j)
	}
	return out
}

// firstFit takes n distinct GPUs with room for shares from cursor on
// (wrapping), marking them used; nil when there are not enough.
func firstFit(used []int, cursor, n, shares int) []int {
	var gpus []int
	for k := 0; k < len(used) && len(gpus) < n; k++ {
		if g := (cursor + k) % len(used); used[g]+shares <= 4 {
			gpus = append(gpus, g)
		}
	}
	if len(gpus) < n {
		return nil
	}
	for _, g := range gpus {
		used[g] += shares
	}
	return gpus
}
