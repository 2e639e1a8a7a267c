package model

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shoenig/test/must"
)

func TestFitSpeedRecovers(t *testing.T) {
	cases := []struct {
		name  string
		form  SpeedForm
		theta []float64
		ps    bool
	}{
		{"ps async", PSAsync, []float64{0.05, 0.02, 0.001, 0.003}, true},
		{"ps sync", PSSync, []float64{0.0004, 0.05, 0.02, 0.001, 0.003}, true},
		{"allreduce", AllReduce, []float64{0.0005, 0.02, 0.01, 0.05, 0.002}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			truth := Speed{Form: tc.form, Theta: tc.theta}
			var train []SpeedSample
			for w := 1; w <= 16; w++ {
				for _, p := range []int{1, 2, 4, 8} {
					if !tc.ps {
						p = 0
					}
					for _, m := range []float64{256, 1024} {
						n := (w + 3) / 4
						train = append(train, SpeedSample{Workers: w, PS: p, Nodes: n, Batch: m, StepsPerSec: truth.StepsPerSecond(w, p, n, m)})
						if !tc.ps {
							break
						}
					}
					if !tc.ps {
						break
					}
				}
			}
			got, err := FitSpeed(tc.form, train)
			must.NoError(t, err)
			for i := range tc.theta {
				must.True(t, math.Abs(got.Theta[i]-tc.theta[i]) < 1e-6+1e-3*tc.theta[i],
					must.Sprintf("theta[%d]=%v want %v", i, got.Theta[i], tc.theta[i]))
			}
			must.True(t, got.Quality.RelRMSE < 1e-6)
		})
	}
}

// TestSpeedPredictsHeldBack trains the all-reduce form on small jobs with 3%
// noise and predicts held-back larger jobs.
func TestSpeedPredictsHeldBack(t *testing.T) {
	truth := Speed{Form: AllReduce, Theta: []float64{0.0005, 0.02, 0.01, 0.05, 0.002}}
	r := rand.New(rand.NewPCG(5, 6))
	var train, held []SpeedSample
	for w := 1; w <= 32; w++ {
		n := (w + 3) / 4
		for _, m := range []float64{256, 512, 1024, 2048} {
			s := SpeedSample{Workers: w, Nodes: n, Batch: m, StepsPerSec: truth.StepsPerSecond(w, 0, n, m)}
			if w <= 12 {
				s.StepsPerSec *= 1 + 0.03*r.NormFloat64()
				train = append(train, s)
			} else {
				held = append(held, s)
			}
		}
	}
	got, err := FitSpeed(AllReduce, train)
	must.NoError(t, err)
	worst := 0.0
	for _, s := range held {
		p := got.StepsPerSecond(s.Workers, 0, s.Nodes, s.Batch)
		worst = math.Max(worst, math.Abs(p-s.StepsPerSec)/s.StepsPerSec)
	}
	t.Logf("fit on %d samples (rel rmse %.3f); held-back max relative error %.3f", got.Quality.Points, got.Quality.RelRMSE, worst)
	// POLICY.md claims 1.3% (with these seeds); the margin is 0.7 point.
	must.True(t, worst < 0.02, must.Sprintf("held-back error %v, POLICY.md claims 1.3%%", worst))
}

func TestFitSpeedErrors(t *testing.T) {
	_, err := FitSpeed(AllReduce, nil)
	must.True(t, errors.Is(err, ErrNotEnoughPoints))
	_, err = FitSpeed(PSSync, []SpeedSample{{Workers: 1, PS: 0, StepsPerSec: 1}})
	must.True(t, errors.Is(err, ErrBadProblem))
	_, err = FitSpeed("nope", []SpeedSample{{Workers: 1, StepsPerSec: 1}})
	must.True(t, errors.Is(err, ErrBadProblem))
}

func TestEfficiency(t *testing.T) {
	must.Eq(t, 1.0, Efficiency(1, 1, 128, 128))
	// Noise-free gradient: bigger batches waste samples.
	must.True(t, math.Abs(Efficiency(1, 0, 128, 256)-0.5) < 1e-12)
	// Pure noise: bigger batches are free.
	must.True(t, math.Abs(Efficiency(0, 1, 128, 1024)-1) < 1e-12)
}

// TestOptimisticStepsPerSecond: up to the largest fitted worker count the
// optimistic speed is the fitted one; beyond it the all-reduce ring term
// stops growing; other forms are unchanged.
func TestOptimisticStepsPerSecond(t *testing.T) {
	truth := Speed{Form: AllReduce, Theta: []float64{0.0005, 0.02, 0.01, 0.05, 0.002}}
	var train []SpeedSample
	for _, w := range []int{1, 2, 4} {
		for _, m := range []float64{256, 512, 1024} {
			train = append(train, SpeedSample{Workers: w, Nodes: 1, Batch: m, StepsPerSec: truth.StepsPerSecond(w, 0, 1, m)})
		}
	}
	got, err := FitSpeed(AllReduce, train)
	must.NoError(t, err)
	must.Eq(t, 4, got.MaxWorkers)
	for _, w := range []int{1, 2, 3, 4} {
		must.Eq(t, got.StepsPerSecond(w, 0, 1, 512), got.OptimisticStepsPerSecond(w, 0, 1, 512))
	}
	for _, w := range []int{5, 8, 16} {
		n := (w + 3) / 4
		th := got.Theta
		want := 1 / (th[0]*512/float64(w) + th[1] + th[3] + th[4]*2)
		opt := got.OptimisticStepsPerSecond(w, 0, n, 512)
		must.True(t, math.Abs(opt-want) <= 1e-9*want, must.Sprintf("w=%d: %v want %v", w, opt, want))
		must.True(t, opt >= got.StepsPerSecond(w, 0, n, 512))
	}
	ps := Speed{Form: PSSync, Theta: []float64{0.001, 0.01, 0.02, 0.001, 0.001}, MaxWorkers: 2}
	must.Eq(t, ps.StepsPerSecond(8, 2, 2, 512), ps.OptimisticStepsPerSecond(8, 2, 2, 512))
}
