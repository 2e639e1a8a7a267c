package model

import (
	"errors"
	"fmt"
	"math"
)

// ErrNotEnoughPoints is returned when a fit has too few samples.
var ErrNotEnoughPoints = errors.New("not enough points to fit")

// LossPoint is one observed training loss after Step steps.
type LossPoint struct {
	Step float64
	Loss float64
}

// Convergence is Optimus's loss model l(k) = 1/(B0*k + B1) + B2, all B >= 0.
type Convergence struct {
	B0      float64    `json:"b0"`
	B1      float64    `json:"b1"`
	B2      float64    `json:"b2"`
	Quality FitQuality `json:"quality"`
}

// Loss predicts the loss after k steps.
func (c Convergence) Loss(k float64) float64 {
	d := c.B0*k + c.B1
	if d <= 0 {
		return math.Inf(1)
	}
	return 1/d + c.B2
}

// StepsToLoss returns the total step count at which the loss reaches
// target, or +Inf when the model says it never will (target <= B2).
func (c Convergence) StepsToLoss(target float64) float64 {
	if target <= c.B2 || c.B0 <= 0 {
		return math.Inf(1)
	}
	k := (1/(target-c.B2) - c.B1) / c.B0
	return math.Max(k, 0)
}

// StepsToConverge returns the total step count after which the loss drops
// by less than delta over the next window steps (Optimus's convergence
// criterion: the improvement between evaluations falls below a threshold).
func (c Convergence) StepsToConverge(delta, window float64) float64 {
	if c.B0 <= 0 || delta <= 0 || window <= 0 {
		return math.Inf(1)
	}
	// l(k) - l(k+W) = W*B0 / ((B0 k + B1)(B0 (k+W) + B1)) < delta. With
	// u = B0 k + B1: u^2 + B0 W u - W B0/delta > 0.
	bw := c.B0 * window
	u := (-bw + math.Sqrt(bw*bw+4*bw/delta)) / 2
	return math.Max((u-c.B1)/c.B0, 0)
}

// ConvergenceFitOptions tunes FitConvergence.
type ConvergenceFitOptions struct {
	// HalfLife weights point i by 0.5^((n-1-i)/HalfLife): recent points
	// count more, so the fit follows a changing curve. 0 means 20 points.
	HalfLife float64
	// MinPoints is the fewest points that allow a fit. 0 means 4.
	MinPoints int
}

// FitConvergence fits Optimus's loss curve to points (in step order) by
// weighted non-negative least squares. For a fixed B2 the model is linear in
// (B0, B1) after the transform 1/(l - B2) = B0*k + B1, so the fit scans B2 over
// [0, min loss) (coarse grid then golden-section refinement), solves NNLS for
// (B0, B1) at each B2, and keeps the B2 with the smallest weighted squared
// error in loss space.
func FitConvergence(points []LossPoint, opt ConvergenceFitOptions) (Convergence, error) {
	if opt.HalfLife <= 0 {
		opt.HalfLife = 20
	}
	if opt.MinPoints <= 0 {
		opt.MinPoints = 4
	}
	if len(points) < opt.MinPoints {
		return Convergence{}, fmt.Errorf("%w: have %d loss points, need %d", ErrNotEnoughPoints, len(points), opt.MinPoints)
	}
	minLoss := math.Inf(1)
	for i, p := range points {
		if math.IsNaN(p.Loss) || math.IsInf(p.Loss, 0) || p.Loss <= 0 || p.Step < 0 {
			return Convergence{}, fmt.Errorf("%w: point %d has step %v loss %v", ErrBadProblem, i, p.Step, p.Loss)
		}
		minLoss = math.Min(minLoss, p.Loss)
	}
	// The fit works in units of the largest loss: the model is scale-free
	// (l = s*l' gives B0 = B0'/s, B1 = B1'/s, B2 = s*B2'), and the NNLS
	// rows' squares neither underflow for tiny losses nor overflow for huge
	// ones (a curve at 1e-9 once fitted as B = 0 with an infinite error).
	scale := 0.0
	for _, p := range points {
		scale = math.Max(scale, p.Loss)
	}
	if scale != 1 {
		return fitScaled(points, scale, opt)
	}
	n := len(points)
	w := make([]float64, n)
	for i := range points {
		w[i] = math.Pow(0.5, float64(n-1-i)/opt.HalfLife)
	}
	fitAt := func(b2 float64) (Convergence, float64) { return fitConvergenceAt(points, w, b2) }
	best := minimizeB2(fitAt, minLoss*(1-1e-6))
	best.Quality = lossQuality(best, points)
	return best, nil
}

// fitScaled fits points in units of scale, their largest loss, and
// scales the model back.
func fitScaled(points []LossPoint, scale float64, opt ConvergenceFitOptions) (Convergence, error) {
	unit := make([]LossPoint, len(points))
	for i, p := range points {
		unit[i] = LossPoint{Step: p.Step, Loss: p.Loss / scale}
	}
	c, err := FitConvergence(unit, opt)
	if err != nil {
		return Convergence{}, err
	}
	c.B0, c.B1, c.B2 = c.B0/scale, c.B1/scale, c.B2*scale
	c.Quality = lossQuality(c, points)
	return c, nil
}

// lossQuality rates c's predictions against the observed losses.
func lossQuality(c Convergence, points []LossPoint) FitQuality {
	pred := make([]float64, len(points))
	obs := make([]float64, len(points))
	for i, p := range points {
		pred[i], obs[i] = c.Loss(p.Step), p.Loss
	}
	return quality(pred, obs)
}

// fitConvergenceAt solves NNLS for (B0, B1) at a fixed B2 with weights w
// and returns the model and its weighted squared error in loss space.
func fitConvergenceAt(points []LossPoint, w []float64, b2 float64) (Convergence, float64) {
	n := len(points)
	// Rows weighted so the linearised residual approximates the loss
	// residual: d(1/(l-b2)) = -dl/(l-b2)^2, so scale by (l-b2)^2.
	a := make([][]float64, n)
	b := make([]float64, n)
	for i, p := range points {
		y := p.Loss - b2
		s := math.Sqrt(w[i]) * y * y
		a[i] = []float64{p.Step * s, s}
		b[i] = s / y
	}
	x, _, err := NNLS(a, b)
	if err != nil {
		return Convergence{}, math.Inf(1)
	}
	c := Convergence{B0: x[0], B1: x[1], B2: b2}
	var sse float64
	for i, p := range points {
		d := c.Loss(p.Step) - p.Loss
		if math.IsInf(d, 0) {
			return c, math.Inf(1)
		}
		sse += w[i] * d * d
	}
	return c, sse
}

// minimizeB2 scans B2 over [0, hi] on a coarse grid, refines around the
// best grid point by golden-section search, and returns the best model.
func minimizeB2(fitAt func(b2 float64) (Convergence, float64), hi float64) Convergence {
	best, bestSSE := fitAt(0)
	bestB2 := 0.0
	const grid = 40
	for g := 1; g < grid; g++ {
		b2 := hi * float64(g) / grid
		if c, sse := fitAt(b2); sse < bestSSE {
			best, bestSSE, bestB2 = c, sse, b2
		}
	}
	// Golden-section refinement around the best grid point.
	lo, up := math.Max(bestB2-hi/grid, 0), math.Min(bestB2+hi/grid, hi)
	const phi = 0.6180339887498949
	x1, x2 := up-phi*(up-lo), lo+phi*(up-lo)
	c1, f1 := fitAt(x1)
	c2, f2 := fitAt(x2)
	for it := 0; it < 40; it++ {
		if f1 < f2 {
			up, x2, c2, f2 = x2, x1, c1, f1
			x1 = up - phi*(up-lo)
			c1, f1 = fitAt(x1)
		} else {
			lo, x1, c1, f1 = x1, x2, c2, f2
			x2 = lo + phi*(up-lo)
			c2, f2 = fitAt(x2)
		}
	}
	if f1 < bestSSE {
		best, bestSSE = c1, f1
	}
	if f2 < bestSSE {
		best = c2
	}
	return best
}

// Progress predicts a job's remaining steps, refitting its convergence
// model as loss points arrive, with an honest cold start.
type Progress struct {
	Opt ConvergenceFitOptions
	// TargetLoss, when > 0, ends the job at that loss; otherwise the job ends
	// at convergence (loss improvement below Delta over Window steps).
	TargetLoss    float64
	Delta, Window float64
	// HintSteps is the user's total step estimate (cold start), 0 if none.
	HintSteps float64
	// Prior is a model from finished jobs of the same kind (cold start),
	// nil if none.
	Prior *Convergence

	points []LossPoint
	fit    *Convergence
	fitErr error
}

// Observe adds a loss point and refits.
func (p *Progress) Observe(step, loss float64) {
	p.points = append(p.points, LossPoint{Step: step, Loss: loss})
	c, err := FitConvergence(p.points, p.Opt)
	if err != nil {
		p.fitErr = err
		return
	}
	p.fit, p.fitErr = &c, nil
}

// Model returns the current fit and whether there is one.
func (p *Progress) Model() (Convergence, bool) {
	if p.fit == nil {
		return Convergence{}, false
	}
	return *p.fit, true
}

// Source says where a remaining-steps estimate came from.
type Source string

// Sources of a remaining-steps estimate.
const (
	SourceFit   Source = "fit"
	SourcePrior Source = "prior"
	SourceHint  Source = "hint"
	SourceNone  Source = "none"
	// SourceDeclared: the job's declared total steps bound the estimate (a
	// run never goes past the end it declares).
	SourceDeclared Source = "declared"
)

// RemainingSteps predicts the steps left after the last observed step, and
// says where the estimate came from. Without a fit it uses the prior, then
// the hint; with nothing it returns +Inf and SourceNone.
func (p *Progress) RemainingSteps() (float64, Source) {
	done := 0.0
	if n := len(p.points); n > 0 {
		done = p.points[n-1].Step
	}
	total := func(c Convergence) float64 {
		if p.TargetLoss > 0 {
			if k := c.StepsToLoss(p.TargetLoss); !math.IsInf(k, 1) {
				return k
			}
		}
		return c.StepsToConverge(p.delta(), p.window())
	}
	switch {
	case p.fit != nil:
		return math.Max(total(*p.fit)-done, 0), SourceFit
	case p.Prior != nil:
		return math.Max(total(*p.Prior)-done, 0), SourcePrior
	case p.HintSteps > 0:
		return math.Max(p.HintSteps-done, 0), SourceHint
	}
	return math.Inf(1), SourceNone
}

func (p *Progress) delta() float64 {
	if p.Delta > 0 {
		return p.Delta
	}
	return 1e-3
}

func (p *Progress) window() float64 {
	if p.Window > 0 {
		return p.Window
	}
	return 1000
}
