package interference

import (
	"math"
	"testing"

	"github.com/shoenig/test/must"
)

func near(t *testing.T, want, got float64) {
	t.Helper()
	must.True(t, math.Abs(want-got) < 1e-9, must.Sprintf("want %v, got %v", want, got))
}

// TestCombinedGain_CalibratedToH100: the model reproduces the H100 pair
// figures it is calibrated against (device/README.md).
func TestCombinedGain_CalibratedToH100(t *testing.T) {
	cpu, gpu := 0.25, 1.0
	half := 0.5
	cases := []struct {
		name string
		a, b Sharer
		mps  bool
		want float64
	}{
		{"cpu-bound pair, time-sliced", Sharer{cpu, half}, Sharer{cpu, half}, false, 2.0},
		{"cpu-bound pair, MPS", Sharer{cpu, half}, Sharer{cpu, half}, true, 2.0},
		{"gpu-bound pair, time-sliced", Sharer{gpu, half}, Sharer{gpu, half}, false, 0.91},
		{"gpu-bound pair, MPS half limits", Sharer{gpu, half}, Sharer{gpu, half}, true, 1.13},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			near(t, tc.want, CombinedGain([]Sharer{tc.a, tc.b}, tc.mps))
		})
	}
}

// TestRate_BadPairFallsGoodPairDoesNot: a GPU-bound job's rate falls when
// another GPU-bound job shares its time-sliced GPU; a CPU-bound job's does
// not when another CPU-bound job joins.
func TestRate_BadPairFallsGoodPairDoesNot(t *testing.T) {
	gpu, cpu := Sharer{1, 0.5}, Sharer{0.25, 0.5}
	near(t, 1, Rate(gpu, nil, false))
	must.Less(t, 0.5, Rate(gpu, []Sharer{gpu}, false))
	near(t, 1, Rate(cpu, nil, false))
	near(t, 1, Rate(cpu, []Sharer{cpu}, false))
	near(t, 1, Rate(cpu, []Sharer{cpu}, true))
	// A GPU-bound neighbour slows a CPU-bound job under time-slicing.
	must.Less(t, 1, Rate(cpu, []Sharer{gpu}, false))
}

// TestRate_ScalesWithShares: a GPU-bound job's MPS rate grows with its
// shares; a job using a quarter of the GPU runs no faster with more than a
// quarter.
func TestRate_ScalesWithShares(t *testing.T) {
	prev := 0.0
	for k := 1; k <= 4; k++ {
		r := Rate(Sharer{Demand: 1, Fraction: float64(k) / 4}, nil, true)
		must.Greater(t, prev, r)
		prev = r
	}
	near(t, 1, prev)
	for k := 1; k <= 4; k++ {
		near(t, 1, Rate(Sharer{Demand: 0.25, Fraction: float64(k) / 4}, nil, true))
	}
}

// TestRate_BoundsBadProfiles: out-of-range demands and fractions are
// bounded, never NaN or above 1.
func TestRate_BoundsBadProfiles(t *testing.T) {
	for _, s := range []Sharer{{-1, 0.5}, {math.NaN(), 0.5}, {5, 0.5}, {1, 0}, {1, math.NaN()}, {1, 7}, {math.Inf(1), -3}} {
		r := Rate(s, []Sharer{s}, false)
		must.True(t, r > 0 && r <= 1, must.Sprintf("%+v: rate %v", s, r))
		r = Rate(s, []Sharer{s}, true)
		must.True(t, r > 0 && r <= 1, must.Sprintf("%+v: rate %v", s, r))
	}
}
