package pollux

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/caravan-nomad/caravan/planner/workload"
)

// appConfig is the per-model configuration of the Pollux artifact
// (simulator/applications.py): how many epochs a job trains, and the
// largest per-GPU batch the model fits when it differs from the traces.
var appConfig = map[string]struct {
	maxEpochs   int
	maxLocalBsz float64
}{
	"bert":        {maxEpochs: 2},
	"cifar10":     {maxEpochs: 100},
	"ncf":         {maxEpochs: 10},
	"imagenet":    {maxEpochs: 90},
	"deepspeech2": {maxEpochs: 80},
	"yolov3":      {maxEpochs: 50, maxLocalBsz: 8},
}

// Application is one model's measured behaviour: speed for any placement
// and per-GPU batch, gradient statistics and progress per epoch.
type Application struct {
	Name                     string
	InitBatch, MaxBatch      float64
	MinLocalBsz, MaxLocalBsz float64
	MaxEpochs                int
	batches                  []int // validated global batch sizes, ascending
	val                      map[int][]workload.ValidationRow
	byPlacement              map[string][]workload.PlacementRow // key: canonical placement
	grid                     *ndGrid
	progressAt               []float64 // progress at the start of epoch e
}

func newApplication(tr *workload.Trace) (*Application, error) {
	a := &Application{Name: tr.Name, val: tr.Validation, byPlacement: map[string][]workload.PlacementRow{}}
	for b := range tr.Validation {
		a.batches = append(a.batches, b)
	}
	sort.Ints(a.batches)
	if len(a.batches) == 0 || len(tr.Placements) == 0 {
		return nil, fmt.Errorf("trace %s: needs validation and placement rows", tr.Name)
	}
	a.InitBatch = float64(a.batches[0])
	a.MaxBatch = float64(a.batches[len(a.batches)-1])
	a.MinLocalBsz, a.MaxLocalBsz = math.Inf(1), 0
	for _, p := range tr.Placements {
		a.MinLocalBsz = math.Min(a.MinLocalBsz, p.LocalBsz)
		a.MaxLocalBsz = math.Max(a.MaxLocalBsz, p.LocalBsz)
		k := canonical(p.Placement)
		a.byPlacement[k] = append(a.byPlacement[k], p)
	}
	for k := range a.byPlacement {
		rows := a.byPlacement[k]
		sort.SliceStable(rows, func(i, j int) bool { return rows[i].LocalBsz < rows[j].LocalBsz })
	}
	minLen := math.MaxInt
	for _, rows := range tr.Validation {
		minLen = min(minLen, len(rows))
	}
	a.MaxEpochs = minLen
	if c, ok := appConfig[tr.Name]; ok {
		a.MaxEpochs = min(c.maxEpochs, minLen)
		if c.maxLocalBsz > 0 {
			a.MaxLocalBsz = c.maxLocalBsz
		}
	}
	a.progressAt = make([]float64, a.MaxEpochs+1)
	for e := 1; e <= a.MaxEpochs; e++ {
		p := math.Inf(1)
		for _, rows := range tr.Validation {
			p = math.Min(p, rows[e-1].Progress)
		}
		a.progressAt[e] = p
	}
	a.grid = newNDGrid(tr)
	return a, nil
}

// canonical is the lexicographically smallest rotation of a placement
// without empty nodes, as a digit string (the artifact's normalisation).
func canonical(pl []int) string {
	var p []int
	for _, x := range pl {
		if x > 0 {
			p = append(p, x)
		}
	}
	best := slices.Clone(p)
	for i := 1; i < len(p); i++ {
		r := append(slices.Clone(p[i:]), p[:i]...)
		if slices.Compare(r, best) < 0 {
			best = r
		}
	}
	b := make([]byte, 0, len(best))
	for _, x := range best {
		if x > 9 {
			return "" // more than 9 GPUs on a node: not in the traces
		}
		b = append(b, byte('0'+x))
	}
	return string(b)
}

// Throughput returns (step time, sync time) in seconds for a placement
// (GPUs per node) and per-GPU batch. Measured placements are interpolated
// linearly in the batch; others through the nodes x replicas x batch grid
// of the scalability measurements.
func (a *Application) Throughput(placement []int, localBsz float64) (float64, float64) {
	if rows, ok := a.byPlacement[canonical(placement)]; ok {
		return interpRows(rows, localBsz)
	}
	nodes, reps := 0, 0
	for _, x := range placement {
		if x > 0 {
			nodes++
			reps += x
		}
	}
	return a.grid.at(min(nodes, 16), reps, localBsz)
}

func interpRows(rows []workload.PlacementRow, b float64) (float64, float64) {
	if b <= rows[0].LocalBsz {
		return rows[0].StepTime, rows[0].SyncTime
	}
	for i := 1; i < len(rows); i++ {
		if b <= rows[i].LocalBsz {
			lo, hi := rows[i-1], rows[i]
			f := (b - lo.LocalBsz) / (hi.LocalBsz - lo.LocalBsz)
			return lo.StepTime + f*(hi.StepTime-lo.StepTime), lo.SyncTime + f*(hi.SyncTime-lo.SyncTime)
		}
	}
	last := rows[len(rows)-1]
	return last.StepTime, last.SyncTime
}

// Progress is the cumulative progress at the start of epoch e.
func (a *Application) Progress(e int) float64 {
	if e <= 0 {
		return 0
	}
	return a.progressAt[min(e, a.MaxEpochs)]
}

// CompletionEpoch is the last epoch a job trains (no target metric: all).
func (a *Application) CompletionEpoch() int { return a.MaxEpochs - 1 }

func (a *Application) bracket(b float64) (int, int) {
	lo, hi := a.batches[0], a.batches[len(a.batches)-1]
	for _, x := range a.batches {
		if float64(x) <= b {
			lo = x
		}
		if float64(x) >= b {
			hi = x
			break
		}
	}
	return lo, hi
}

func (a *Application) interpBatch(b float64, f func(rows []workload.ValidationRow) float64) float64 {
	lo, hi := a.bracket(b)
	vl, vh := f(a.val[lo]), f(a.val[hi])
	if lo == hi {
		return vl
	}
	return ((b-float64(lo))*vh + (float64(hi)-b)*vl) / float64(hi-lo)
}

// GradStats returns the gradient (squared norm, variance) during epoch e
// at global batch b, interpolated between validated batch sizes.
func (a *Application) GradStats(b float64, e int) (float64, float64) {
	e = min(e, a.MaxEpochs-1)
	sqr := a.interpBatch(b, func(r []workload.ValidationRow) float64 { return r[e].GradSqr })
	v := a.interpBatch(b, func(r []workload.ValidationRow) float64 { return r[e].GradVar })
	return sqr, v
}

// Iteration is the step count after completing epoch e at global batch b.
func (a *Application) Iteration(b float64, e int) float64 {
	e = min(e, a.MaxEpochs-1)
	return a.interpBatch(b, func(r []workload.ValidationRow) float64 { return r[e].Iteration })
}

// Metric is the validation metric after epoch e at global batch b (accuracy,
// loss or error rate, whatever the trace records), interpolated between
// validated batch sizes.
func (a *Application) Metric(b float64, e int) float64 {
	e = min(e, a.MaxEpochs-1)
	return a.interpBatch(b, func(r []workload.ValidationRow) float64 { return r[e].Metric })
}

// batchLimits is what an adaptive job knows about its own batch sizes: the
// initial (reference) batch, the largest global batch it may use, and the
// per-GPU batch range that fits in memory. A jobspec declares these; they
// carry nothing about speed or remaining work.
type batchLimits struct {
	InitBatch, MaxBatch      float64
	MinLocalBsz, MaxLocalBsz float64
}

func (a *Application) limits() batchLimits {
	return batchLimits{InitBatch: a.InitBatch, MaxBatch: a.MaxBatch, MinLocalBsz: a.MinLocalBsz, MaxLocalBsz: a.MaxLocalBsz}
}
