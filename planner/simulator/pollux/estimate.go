package pollux

import (
	"math"

	"github.com/caravan-nomad/caravan/planner/model"
)

// Sources of an online remaining-work estimate.
const (
	remainingPrior   = "prior"   // finished jobs of the same kind
	remainingFit     = "fit"     // Optimus's loss curve fitted to the job's reports
	remainingElapsed = "elapsed" // nothing better: as much again as done so far
)

// kindHistory is what an online policy may learn from jobs that finished:
// the total progress each reached, per kind. It also caches the loss-curve
// fits of running jobs (refitted only when a job reports a new point).
type kindHistory struct {
	done map[string][]float64 // final progress of finished jobs
	fits map[string]cachedCurve
	// samples are the speed measurements of finished jobs per kind, and
	// version counts the jobs that contributed (jobs refit when it moves).
	samples map[string]map[profileKey][2]float64
	maxReps map[string]int
	version map[string]int
	// firstGrad sums the gradient statistics finished jobs first reported.
	firstGrad map[string][3]float64
}

type cachedCurve struct {
	points    int
	predicted float64 // predicted final progress; NaN: no fit
}

func newKindHistory() *kindHistory {
	return &kindHistory{done: map[string][]float64{}, fits: map[string]cachedCurve{},
		samples: map[string]map[profileKey][2]float64{}, maxReps: map[string]int{}, version: map[string]int{},
		firstGrad: map[string][3]float64{}}
}

// finished records a completed job of kind: its final progress, what it
// measured and the gradient statistics it first reported.
func (k *kindHistory) finished(kind, name string, progress float64, profile map[profileKey][2]float64, firstGrad [2]float64) {
	k.done[kind] = append(k.done[kind], progress)
	if firstGrad != [2]float64{} {
		g := k.firstGrad[kind]
		k.firstGrad[kind] = [3]float64{g[0] + firstGrad[0], g[1] + firstGrad[1], g[2] + 1}
	}
	delete(k.fits, name)
	m := k.samples[kind]
	if m == nil {
		m = map[profileKey][2]float64{}
		k.samples[kind] = m
	}
	for key, v := range profile {
		if _, ok := m[key]; !ok {
			m[key] = v
		}
		k.maxReps[kind] = max(k.maxReps[kind], key.reps)
	}
	k.version[kind]++
}

// gradPrior is the mean of the gradient statistics finished jobs of kind
// first reported ((0, 0) when none has finished): a new job's batch choice
// starts from it instead of assuming no gradient noise.
func (k *kindHistory) gradPrior(kind string) (float64, float64) {
	g := k.firstGrad[kind]
	if g[2] == 0 {
		return 0, 0
	}
	return g[0] / g[2], g[1] / g[2]
}

// prior is the mean total progress of finished jobs of kind.
func (k *kindHistory) prior(kind string) (float64, bool) {
	t := k.done[kind]
	if len(t) == 0 {
		return 0, false
	}
	s := 0.0
	for _, x := range t {
		s += x
	}
	return s / float64(len(t)), true
}

// estimateRemaining predicts a job's remaining progress from what an online
// policy may know: the mean total of finished jobs of its kind when the job
// has not yet passed it; else the total at which Optimus's loss curve,
// fitted to the job's reported validation metric, converges; else as much
// again as it has done (the least-attained-service guess: new jobs look
// short).
func estimateRemaining(o *observed, kinds *kindHistory) (float64, string) {
	floor := math.Max(o.progress*1e-3, 1e-6)
	if total, ok := kinds.prior(o.kind); ok && total > o.progress {
		return total - o.progress, remainingPrior
	}
	if total := kinds.curveTotal(o); total > o.progress {
		return total - o.progress, remainingFit
	}
	return math.Max(o.progress, floor), remainingElapsed
}

// curveTotal fits Optimus's curve l(k) = 1/(b0 k + b1) + b2 to the job's
// reported metric (a rising metric, such as accuracy, enters as 1/metric so
// it falls like a loss) and returns the progress at which it converges:
// where doubling the progress would improve the fitted loss by less than 1%
// (Optimus's criterion with the window and delta made scale-free). NaN when
// there are too few points or the fit fails.
func (k *kindHistory) curveTotal(o *observed) float64 {
	n := len(o.curve)
	if c, ok := k.fits[o.name]; ok && c.points == n {
		return c.predicted
	}
	total := fitCurveTotal(o.curve)
	k.fits[o.name] = cachedCurve{points: n, predicted: total}
	return total
}

// curveWindow bounds the points a fit uses (the most recent ones).
const curveWindow = 32

func fitCurveTotal(curve []model.LossPoint) float64 {
	if len(curve) < 4 {
		return math.NaN()
	}
	pts := make([]model.LossPoint, 0, curveWindow)
	rising := curve[len(curve)-1].Loss > curve[0].Loss
	for _, p := range curve[max(len(curve)-curveWindow, 0):] {
		l := p.Loss
		if rising {
			if l <= 0 {
				continue
			}
			l = 1 / l
		}
		pts = append(pts, model.LossPoint{Step: p.Step, Loss: l})
	}
	c, err := model.FitConvergence(pts, model.ConvergenceFitOptions{})
	if err != nil || c.B0 <= 0 {
		return math.NaN()
	}
	last := pts[len(pts)-1].Step
	for kk := last; kk <= maxExtrapolation*last; kk *= 1.25 {
		if c.Loss(kk)-c.Loss(2*kk) < 0.01*c.Loss(kk) {
			return kk
		}
	}
	return math.NaN() // converges only far beyond the data: not a credible fit
}

// maxExtrapolation bounds how far past the observed progress a fitted
// curve is trusted: a fit that converges only beyond ten times the
// progress seen (a learning-rate step, for one, makes the metric climb
// again and the fit extrapolate nearly linear improvement) is discarded.
const maxExtrapolation = 10
