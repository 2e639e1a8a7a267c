package pollux

import (
	"math"
	"sort"

	"github.com/caravan-nomad/caravan/planner/model"
)

func sortSamples(s []model.SpeedSample) {
	sort.Slice(s, func(a, b int) bool {
		if s[a].Workers != s[b].Workers {
			return s[a].Workers < s[b].Workers
		}
		if s[a].Nodes != s[b].Nodes {
			return s[a].Nodes < s[b].Nodes
		}
		return s[a].Batch < s[b].Batch
	})
}

// predictStep is a fitted model's (step, compute) time for a per-GPU batch.
// Past the largest size its kind has been measured at, the prediction is
// optimistic (model.Speed.OptimisticStepsPerSecond), so jobs explore larger
// sizes within the exploration cap instead of trusting an extrapolated
// synchronisation slope.
func predictStep(sp *model.Speed, nodes, reps int, atomic float64) (float64, float64) {
	f := sp.OptimisticStepsPerSecond(reps, 0, nodes, atomic*float64(reps))
	if f <= 0 {
		return math.Inf(1), math.Inf(1)
	}
	step := 1 / f
	compute := sp.Theta[0]*atomic + sp.Theta[1]
	return step, math.Min(compute, step)
}

// bestBatch searches global batch sizes (geometric grid, as AdaptDL does)
// for the best predicted goodput on nodes x reps, returning the goodput (in
// initial-batch steps per second), the per-GPU batch and the accumulation
// steps. Goodput is 0 when no batch fits.
func bestBatch(a batchLimits, sp *model.Speed, sqr, v float64, nodes, reps int) (float64, float64, int) {
	const points = 50
	lo := math.Max(a.InitBatch, a.MinLocalBsz*float64(reps))
	hi := a.MaxBatch
	if lo > hi {
		return 0, 0, 0
	}
	best, bAtomic, bAccum := 0.0, 0.0, 0
	for i := 0; i < points; i++ {
		b := lo
		if points > 1 && hi > lo {
			b = lo * math.Pow(hi/lo, float64(i)/float64(points-1))
		}
		local := b / float64(reps)
		accum := int(math.Ceil(local/a.MaxLocalBsz-1e-8)) - 1
		if reps == 1 && local > a.InitBatch+1e-8 {
			accum = max(accum, 1)
		}
		accum = max(accum, 0)
		atomic := math.Ceil(local/float64(accum+1) - 1e-8)
		if atomic < a.MinLocalBsz || atomic > a.MaxLocalBsz {
			continue
		}
		step, compute := predictStep(sp, nodes, reps, atomic)
		total := step + compute*float64(accum)
		bsz := float64(reps) * atomic * float64(accum+1)
		g := model.Gain(sqr, v, bsz/a.InitBatch) / total
		if g > best {
			best, bAtomic, bAccum = g, atomic, accum
		}
	}
	return best, bAtomic, bAccum
}
