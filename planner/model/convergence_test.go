package model

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shoenig/test/must"
)

func synthLoss(c Convergence, steps []float64, noise float64, r *rand.Rand) []LossPoint {
	out := make([]LossPoint, len(steps))
	for i, k := range steps {
		out[i] = LossPoint{Step: k, Loss: c.Loss(k) * (1 + noise*r.NormFloat64())}
	}
	return out
}

func TestFitConvergenceRecovers(t *testing.T) {
	cases := []struct {
		name  string
		truth Convergence
		noise float64
		tol   float64 // relative error allowed on each parameter
	}{
		{"exact", Convergence{B0: 0.002, B1: 0.5, B2: 0.3}, 0, 0.02},
		{"exact no floor", Convergence{B0: 0.01, B1: 0.25, B2: 0}, 0, 0.02},
		{"noisy", Convergence{B0: 0.002, B1: 0.5, B2: 0.3}, 0.005, 0.25},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 7))
			var steps []float64
			for k := 0.0; k <= 5000; k += 100 {
				steps = append(steps, k)
			}
			c, err := FitConvergence(synthLoss(tc.truth, steps, tc.noise, r), ConvergenceFitOptions{HalfLife: 1000})
			must.NoError(t, err)
			rel := func(got, want float64) float64 {
				if want == 0 {
					return math.Abs(got)
				}
				return math.Abs(got-want) / want
			}
			must.True(t, rel(c.B0, tc.truth.B0) < tc.tol, must.Sprintf("b0 %v want %v", c.B0, tc.truth.B0))
			must.True(t, rel(c.B1, tc.truth.B1) < tc.tol, must.Sprintf("b1 %v want %v", c.B1, tc.truth.B1))
			must.True(t, rel(c.B2, tc.truth.B2) < tc.tol+0.01, must.Sprintf("b2 %v want %v", c.B2, tc.truth.B2))
			must.Eq(t, len(steps), c.Quality.Points)
		})
	}
}

// TestConvergencePredictsHeldBack fits the first 60% of a noisy curve and
// checks the prediction of the held-back 40%.
func TestConvergencePredictsHeldBack(t *testing.T) {
	truth := Convergence{B0: 0.001, B1: 0.4, B2: 0.2}
	r := rand.New(rand.NewPCG(3, 4))
	var steps []float64
	for k := 0.0; k <= 10000; k += 100 {
		steps = append(steps, k)
	}
	pts := synthLoss(truth, steps, 0.01, r)
	cut := len(pts) * 6 / 10
	c, err := FitConvergence(pts[:cut], ConvergenceFitOptions{})
	must.NoError(t, err)
	worst := 0.0
	for _, p := range pts[cut:] {
		worst = math.Max(worst, math.Abs(c.Loss(p.Step)-truth.Loss(p.Step))/truth.Loss(p.Step))
	}
	t.Logf("held-back max relative error of the loss prediction: %.4f", worst)
	// POLICY.md claims 0.4% (0.36% with these seeds); the margin is 0.1
	// point, so a fit that got measurably worse fails here.
	must.True(t, worst < 0.005, must.Sprintf("held-back relative error %v, POLICY.md claims 0.4%%", worst))
}

func TestConvergenceStepsTo(t *testing.T) {
	c := Convergence{B0: 0.001, B1: 0.5, B2: 0.2}
	k := c.StepsToLoss(0.3)
	must.True(t, math.Abs(c.Loss(k)-0.3) < 1e-12)
	must.True(t, math.IsInf(c.StepsToLoss(0.2), 1))
	kc := c.StepsToConverge(1e-3, 100)
	must.True(t, math.Abs((c.Loss(kc)-c.Loss(kc+100))-1e-3) < 1e-9)
}

func TestProgressColdStart(t *testing.T) {
	prior := &Convergence{B0: 0.001, B1: 0.5, B2: 0.2}
	cases := []struct {
		name string
		p    Progress
		want Source
	}{
		{"nothing", Progress{}, SourceNone},
		{"hint", Progress{HintSteps: 5000}, SourceHint},
		{"prior beats hint", Progress{HintSteps: 5000, Prior: prior}, SourcePrior},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.Observe(100, prior.Loss(100)) // one point: no fit yet
			_, src := p.RemainingSteps()
			must.Eq(t, tc.want, src)
		})
	}
	p := Progress{TargetLoss: 0.3}
	for k := 0.0; k < 1000; k += 100 {
		p.Observe(k, prior.Loss(k))
	}
	rem, src := p.RemainingSteps()
	must.Eq(t, SourceFit, src)
	want := prior.StepsToLoss(0.3) - 900
	must.True(t, math.Abs(rem-want)/want < 0.01, must.Sprintf("remaining %v want %v", rem, want))
}

func TestFitConvergenceErrors(t *testing.T) {
	_, err := FitConvergence([]LossPoint{{1, 1}}, ConvergenceFitOptions{})
	must.True(t, errors.Is(err, ErrNotEnoughPoints))
	_, err = FitConvergence([]LossPoint{{1, 1}, {2, -1}, {3, 1}, {4, 1}}, ConvergenceFitOptions{})
	must.True(t, errors.Is(err, ErrBadProblem))
}

// TestFitConvergence_ScaleFree: the same curve at every loss scale the
// progress wire accepts (1e-30 to 1e12) fits to the same shape: the
// convergence step does not depend on the loss's units. Before, a curve at
// 1e-6 or below fitted as B = 0 with an infinite error and no error
// returned.
func TestFitConvergence_ScaleFree(t *testing.T) {
	for _, scale := range []float64{1e-30, 1e-12, 1e-6, 1e-3, 1, 1e6, 1e12} {
		var pts []LossPoint
		for i := 0; i < 8; i++ {
			k := float64(i * 100)
			pts = append(pts, LossPoint{Step: k, Loss: scale * (1/(0.01*k+1) + 0.1)})
		}
		c, err := FitConvergence(pts, ConvergenceFitOptions{})
		must.NoError(t, err)
		must.InDelta(t, 0.1*scale, c.B2, 1e-6*scale, must.Sprintf("scale %g", scale))
		must.InDelta(t, 2601.56, c.StepsToConverge(0.01*scale, 1000), 0.1, must.Sprintf("scale %g", scale))
	}
}
