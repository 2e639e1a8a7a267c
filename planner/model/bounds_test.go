package model

import (
	"math"
	"testing"

	"github.com/shoenig/test/must"
)

func TestBounded(t *testing.T) {
	measured := []SpeedSample{
		{Workers: 1, PS: 1, Nodes: 1, StepsPerSec: 10},
		{Workers: 2, PS: 1, Nodes: 1, StepsPerSec: 16},
	}
	cases := []struct {
		name    string
		f       float64
		w, p, n int
		want    float64
	}{
		{"measured shape predicts the measurement", 0.0005, 1, 1, 1, 10},
		{"measured shape, even above the fit", 99, 2, 1, 1, 16},
		{"no more than linear over a measured shape", 1000, 4, 1, 1, 32},
		{"a server count bounds by p/m", 1e9, 1, 4, 1, 40},
		{"twice the servers and workers", 1e9, 2, 2, 1, 32},
		{"a plausible prediction is kept", 20, 3, 1, 1, 20},
		{"more nodes than measured: no lower bound", 0.001, 1, 1, 2, 0.001},
		{"no workers", 5, 0, 1, 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, Bounded(tc.f, tc.w, tc.p, tc.n, measured))
		})
	}
	// Fewer workers than a measured shape: no slower than its scaled value.
	two := measured[1:]
	must.Eq(t, 8, Bounded(0.001, 1, 1, 1, two))
	must.Eq(t, 8, Bounded(math.NaN(), 1, 1, 1, two), must.Sprint("NaN counts as zero, then the lower bound"))
	must.Eq(t, 0.001, Bounded(0.001, 1, 2, 1, two), must.Sprint("no lower bound at another server count"))
	// Nothing measured: the prediction stands.
	must.Eq(t, 7, Bounded(7, 3, 1, 1, nil))
}

// TestFitSpeedOneServerLevelExploresOneBoundedStep: samples at one server
// count cannot tell the servers' cost from the workers' (w/p is a multiple
// of w), so a fit that put it all on w/p predicted that four servers would
// save almost everything (the live planner's ps 1 -> 4). Now the fit holds
// no server terms, the explorer looks at most one server beyond the
// measured count, and assumes at most that the worker-proportional cost
// divides among the servers.
func TestFitSpeedOneServerLevelExploresOneBoundedStep(t *testing.T) {
	truth := Speed{Form: PSSync, Theta: []float64{0.0004, 0.05, 0.01, 0.02, 0}}
	var train []SpeedSample
	for _, w := range []int{1, 2, 4} {
		train = append(train, SpeedSample{Workers: w, PS: 1, Nodes: 1, Batch: 256, StepsPerSec: truth.StepsPerSecond(w, 1, 1, 256)})
	}
	sp, err := FitSpeed(PSSync, train)
	must.NoError(t, err)
	must.Eq(t, 1, sp.PSLevels)
	must.Eq(t, 1, sp.MaxPS)
	must.Eq(t, 0, sp.Theta[2], must.Sprint("no server term fitted from one server count"))
	must.Eq(t, 0, sp.Theta[4], must.Sprint("no server term fitted from one server count"))
	for _, s := range train {
		must.Between(t, 0.99*s.StepsPerSec, sp.OptimisticStepsPerSecond(s.Workers, 1, 1, 256), 1.01*s.StepsPerSec)
	}
	at := func(p int) float64 { return sp.OptimisticStepsPerSecond(2, p, 1, 256) }
	must.Greater(t, at(1), at(2), must.Sprint("one more server is explored optimistically"))
	must.LessEq(t, 2*at(1), at(2), must.Sprint("at most p/P times faster"))
	must.Eq(t, at(2), at(4), must.Sprint("no further than one server beyond the measured count"))
	// Optimistic: half the truth's worker-proportional cost is the servers',
	// the explorer assumes all of it is.
	must.Greater(t, truth.StepsPerSecond(2, 2, 1, 256), at(2))

	// A job that scales linearly with workers gives servers nothing to save.
	lin := Speed{Form: PSSync, Theta: []float64{0.001, 0.01, 0, 0, 0}}
	train = train[:0]
	for _, w := range []int{1, 2, 4} {
		train = append(train, SpeedSample{Workers: w, PS: 1, Nodes: 1, Batch: 256, StepsPerSec: lin.StepsPerSecond(w, 1, 1, 256)})
	}
	sp, err = FitSpeed(PSSync, train)
	must.NoError(t, err)
	must.Between(t, 0.999, sp.OptimisticStepsPerSecond(2, 2, 1, 256)/sp.OptimisticStepsPerSecond(2, 1, 1, 256), 1.001)
}
