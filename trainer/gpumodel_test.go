package trainer

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/internal/interference"
)

// occupy writes gpu's occupancy file: the holders' reservations, GPU use
// (percent) and share fractions.
func occupy(t *testing.T, dir, gpu string, mps bool, holders ...interference.Holder) {
	t.Helper()
	must.NoError(t, interference.WriteFile(dir, &interference.Occupancy{Simulated: true, GPU: gpu, MPS: mps, Holders: holders}))
}

func holder(res string, usePercent uint32, fraction float64) interference.Holder {
	return interference.Holder{Reservation: res, SMPercent: &usePercent, Fraction: fraction}
}

// fixedModel reads the occupancy file on every call (no caching) and
// records the modelled compute time instead of sleeping.
func fixedModel(p GPUProfile) (*gpuModel, *time.Duration) {
	g := newGPUModel(p)
	g.ttl = 0
	var mu sync.Mutex
	total := new(time.Duration)
	g.sleep = func(_ context.Context, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		*total += d
	}
	return g, total
}

// TestGPUModel_RatesFallForBadPairNotGoodPair: a GPU-bound trainer's
// MODELLED rate falls when another GPU-bound job shares its time-sliced
// GPU; a CPU-bound trainer's does not when another CPU-bound job joins.
func TestGPUModel_RatesFallForBadPairNotGoodPair(t *testing.T) {
	cases := []struct {
		name     string
		self     int
		neighbor uint32
		mps      bool
		want     float64 // rate packed, against alone
	}{
		{"bad pair: two GPU-bound, time-sliced", 100, 100, false, 0.455},
		{"good pair: two CPU-bound, time-sliced", 25, 25, false, 1},
		{"good pair: two CPU-bound, MPS", 25, 25, true, 1},
		{"GPU-bound neighbour slows a CPU-bound job, time-sliced", 25, 100, false, 0.728},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, gpu := t.TempDir(), "GPU-a"
			g, _ := fixedModel(GPUProfile{UsePercent: tc.self, StateDir: dir, GPU: gpu, Reservation: "me"})
			occupy(t, dir, gpu, tc.mps, holder("me", uint32(tc.self), 0.5))
			alone := 1 / g.Slowdown()
			must.Eq(t, 1.0, alone)
			occupy(t, dir, gpu, tc.mps, holder("me", uint32(tc.self), 0.5), holder("other", tc.neighbor, 0.5))
			packed := 1 / g.Slowdown()
			must.True(t, math.Abs(packed-tc.want) < 1e-9, must.Sprintf("packed rate %v, want %v", packed, tc.want))
			// The neighbour leaves: the rate comes back.
			occupy(t, dir, gpu, tc.mps, holder("me", uint32(tc.self), 0.5))
			must.Eq(t, 1.0, 1/g.Slowdown())
		})
	}
}

// TestGPUModel_ScalesWithShares: on an MPS GPU a GPU-bound trainer's rate
// grows with the shares it holds; one using a quarter of the GPU runs no
// faster with more than one share of four.
func TestGPUModel_ScalesWithShares(t *testing.T) {
	dir, gpu := t.TempDir(), "GPU-a"
	for _, use := range []int{100, 25} {
		g, _ := fixedModel(GPUProfile{UsePercent: use, StateDir: dir, GPU: gpu, Reservation: "me"})
		prev := 0.0
		for k := 1; k <= 4; k++ {
			occupy(t, dir, gpu, true, holder("me", uint32(use), float64(k)/4))
			r := 1 / g.Slowdown()
			if use == 100 {
				must.Greater(t, prev, r, must.Sprintf("%d shares", k))
			} else {
				must.Eq(t, 1.0, r, must.Sprintf("%d shares", k))
			}
			prev = r
		}
	}
}

// TestGPUModel_WithoutOccupancy: no profile is no model; a profile without
// an occupancy file takes its fraction and mode from the environment.
func TestGPUModel_WithoutOccupancy(t *testing.T) {
	var none *gpuModel
	must.Eq(t, 1.0, none.Slowdown())
	g, _ := fixedModel(GPUProfile{})
	must.Eq(t, 1.0, g.Slowdown())
	g, _ = fixedModel(GPUProfile{UsePercent: 100, Fraction: 0.5, MPS: true, StateDir: t.TempDir(), GPU: "GPU-none"})
	must.True(t, math.Abs(1/g.Slowdown()-0.565) < 1e-9)
}

// TestRun_InterferenceChangesTimingNotResults: a run whose GPU is shared
// with a GPU-bound neighbour spends 1/0.455 times the modelled compute of
// a run alone, and ends with the same parameters bit for bit.
func TestRun_InterferenceChangesTimingNotResults(t *testing.T) {
	c := DefaultConfig()
	c.Samples, c.Steps, c.LogEvery, c.ComputePerSample = 512, 50, 0, time.Microsecond
	dir, gpu := t.TempDir(), "GPU-a"
	p := GPUProfile{UsePercent: 100, StateDir: dir, GPU: gpu, Reservation: "me"}

	occupy(t, dir, gpu, false, holder("me", 100, 0.5))
	g, alone := fixedModel(p)
	solo, err := Run(t.Context(), c, Options{gpu: g})
	must.NoError(t, err)

	occupy(t, dir, gpu, false, holder("me", 100, 0.5), holder("other", 100, 0.5))
	g, shared := fixedModel(p)
	packed, err := Run(t.Context(), c, Options{gpu: g})
	must.NoError(t, err)

	must.Eq(t, solo.Hash, packed.Hash)
	want := time.Duration(c.Steps) * time.Duration(c.Batch) * c.ComputePerSample
	must.Eq(t, want, *alone)
	ratio := float64(*shared) / float64(*alone)
	must.True(t, math.Abs(ratio-1/0.455) < 1e-3, must.Sprintf("modelled compute ratio %v", ratio))
}

func TestGPUProfileFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	p, err := GPUProfileFromEnv(env(map[string]string{
		EnvGPUUsePercent: "25", interference.EnvStateDir: "/s", envVisible: "GPU-a,GPU-b",
		envReservation: "r1", envFractions: "0.5000,1.0000", envMPSPipe: "/p",
	}), -1)
	must.NoError(t, err)
	must.Eq(t, GPUProfile{UsePercent: 25, StateDir: "/s", GPU: "GPU-a", Reservation: "r1", Fraction: 0.5, MPS: true}, p)
	p, err = GPUProfileFromEnv(env(map[string]string{EnvGPUUsePercent: "25"}), 60)
	must.NoError(t, err)
	must.Eq(t, 60, p.UsePercent, must.Sprint("the flag wins"))
	p, err = GPUProfileFromEnv(env(nil), -1)
	must.NoError(t, err)
	must.Eq(t, 0, p.UsePercent)

	p, err = GPUProfileFromEnv(env(map[string]string{EnvGPUUsePercent: "150"}), -1)
	must.NoError(t, err)
	must.Eq(t, 100, p.UsePercent, must.Sprint("above 100 counts as 100, as the simulated backend reads it"))
	p, err = GPUProfileFromEnv(env(map[string]string{envFractions: "junk"}), -1)
	must.NoError(t, err, must.Sprint("no profile: the rest is not read"))

	for _, tc := range []struct {
		env  map[string]string
		flag int
		want string
	}{
		{map[string]string{EnvGPUUsePercent: "lots"}, -1, EnvGPUUsePercent + `="lots"`},
		{map[string]string{EnvGPUUsePercent: "-3"}, -1, EnvGPUUsePercent + `="-3"`},
		{map[string]string{EnvGPUUsePercent: "50", envFractions: "2"}, -1, envFractions},
		{nil, 150, "gpu-use-percent 150"},
	} {
		_, err := GPUProfileFromEnv(env(tc.env), tc.flag)
		must.ErrorContains(t, err, tc.want)
	}
}
