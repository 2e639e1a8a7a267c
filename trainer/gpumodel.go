package trainer

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caravan-nomad/caravan/internal/interference"
)

// Environment the GPU profile reads: the simulated backend's usage claim
// (so the plugin's stats and the model agree), the state directory it
// keeps occupancy files in, and the reservation the device plugin gave.
const (
	EnvGPUUsePercent = "CARAVAN_SIMULATED_GPU_SM_PERCENT"
	envReservation   = "CARAVAN_GPU_RESERVATION"
	envVisible       = "CUDA_VISIBLE_DEVICES"
	envFractions     = "CARAVAN_GPU_MEMORY_FRACTION"
	envMPSPipe       = "CUDA_MPS_PIPE_DIRECTORY"
	// occupancyTTL bounds how often the occupancy file is read.
	occupancyTTL = 500 * time.Millisecond
)

// GPUProfile is a trainer's MODELLED GPU: the share of a whole GPU it keeps
// busy (its profile) and where it learns who shares its simulated GPU.
// With a profile, the modelled compute (ComputePerSample) runs at the
// speed internal/interference's model gives: slower when the GPU is
// shared with jobs that need it, faster with more shares up to the
// profile's need. Only timing changes, never the numbers computed.
type GPUProfile struct {
	// UsePercent is the profile, 1..100 (0: none, the modelled compute
	// is the plain ComputePerSample).
	UsePercent int
	// StateDir holds the simulated GPU's occupancy files ("": none, the
	// job is alone on its GPU as far as the model knows).
	StateDir    string
	GPU         string
	Reservation string
	// Fraction is the job's share of its GPU from its own environment,
	// used until the occupancy file lists it (0: the whole GPU).
	Fraction float64
	// MPS is the sharing mode from the environment, used when there is
	// no occupancy file (the file's own mps wins).
	MPS bool
}

// GPUProfileFromEnv reads the profile's environment; usePercent >= 0
// overrides $CARAVAN_SIMULATED_GPU_SM_PERCENT, which, as for the simulated
// backend, counts as 100 above 100. A malformed variable is an error naming
// it; without a profile the rest of the environment is not read.
func GPUProfileFromEnv(getenv func(string) string, usePercent int) (GPUProfile, error) {
	var p GPUProfile
	switch {
	case usePercent > 100:
		return p, fmt.Errorf("gpu-use-percent %d: not in 0..100", usePercent)
	case usePercent >= 0:
		p.UsePercent = usePercent
	default:
		if v := getenv(EnvGPUUsePercent); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return p, fmt.Errorf("%s=%q: not a whole percentage", EnvGPUUsePercent, v)
			}
			p.UsePercent = int(min(n, 100))
		}
	}
	if p.UsePercent == 0 {
		return p, nil
	}
	p.StateDir = getenv(interference.EnvStateDir)
	p.Reservation = getenv(envReservation)
	p.MPS = getenv(envMPSPipe) != ""
	if gpus := getenv(envVisible); gpus != "" {
		p.GPU, _, _ = strings.Cut(gpus, ",")
	}
	if v := getenv(envFractions); v != "" {
		first, _, _ := strings.Cut(v, ",")
		f, err := strconv.ParseFloat(first, 64)
		if err != nil || !(f > 0 && f <= 1) {
			return p, fmt.Errorf("%s=%q: not a fraction in (0,1]", envFractions, v)
		}
		p.Fraction = f
	}
	return p, nil
}

// Label describes the profile wherever the compute label is printed.
func (p GPUProfile) Label() string {
	if p.UsePercent <= 0 {
		return ""
	}
	return fmt.Sprintf(" gpu_use=%d%% interference=modelled", p.UsePercent)
}

// gpuModel is a profile at run time: it reads the occupancy file at most
// every ttl and caches the slowdown it gives.
type gpuModel struct {
	p     GPUProfile
	now   func() time.Time
	ttl   time.Duration
	sleep func(ctx context.Context, d time.Duration)

	mu       sync.Mutex
	readAt   time.Time
	slowdown float64
}

func newGPUModel(p GPUProfile) *gpuModel {
	return &gpuModel{p: p, now: time.Now, ttl: occupancyTTL, sleep: sleepCtx}
}

// Slowdown is how much longer the modelled compute takes than
// ComputePerSample says: 1 / the model's rate (1 without a profile).
func (g *gpuModel) Slowdown() float64 {
	if g == nil || g.p.UsePercent <= 0 {
		return 1
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if now := g.now(); g.slowdown == 0 || now.Sub(g.readAt) >= g.ttl {
		g.slowdown, g.readAt = 1/g.rate(), now
	}
	return g.slowdown
}

// rate is the model's speed for this job on its GPU as the occupancy file
// last described it.
func (g *gpuModel) rate() float64 {
	self := interference.Sharer{Demand: float64(g.p.UsePercent) / 100, Fraction: g.p.Fraction}
	mps := g.p.MPS
	var others []interference.Sharer
	if g.p.StateDir != "" && g.p.GPU != "" {
		if occ, err := interference.ReadFile(g.p.StateDir, g.p.GPU); err == nil {
			mps = occ.MPS
			for _, h := range occ.Holders {
				if h.Reservation == g.p.Reservation && g.p.Reservation != "" {
					if h.Fraction > 0 {
						self.Fraction = h.Fraction
					}
					continue
				}
				demand := 1.0 // unknown profile: GPU-bound
				if h.SMPercent != nil {
					demand = float64(*h.SMPercent) / 100
				}
				others = append(others, interference.Sharer{Demand: demand, Fraction: h.Fraction})
			}
		}
	}
	return interference.Rate(self, others, mps)
}

// modelledCompute sleeps c.ComputePerSample per sample, times g's
// slowdown: MODELLED compute time standing in for a GPU's.
func modelledCompute(ctx context.Context, c Config, samples int, g *gpuModel) {
	if c.ComputePerSample <= 0 || samples <= 0 {
		return
	}
	d := time.Duration(float64(time.Duration(samples)*c.ComputePerSample) * g.Slowdown())
	if g != nil && g.sleep != nil {
		g.sleep(ctx, d)
		return
	}
	sleepCtx(ctx, d)
}
