// Package interference is caravan's MODELLED GPU interference: how fast a
// training process runs on a GPU it shares, from each sharer's GPU-use
// profile and share of the GPU, and the per-GPU occupancy file through which
// the simulated device backend tells trainers who shares their GPU. Nothing
// here is measured at run time; the model is calibrated against the figures
// below. It uses only the standard library, so the device plugin, the
// trainer and the planner may all import it.
//
// The model (one GPU, its sharers i with demand d_i and share fraction a_i):
//
//   - Demand d_i in (0,1] is the job's profile: the fraction of a whole GPU
//     it keeps busy when it runs alone at full speed (a CPU- or input-bound
//     job: small; a GPU-bound job: 1).
//   - Use u_i is what the job may take. Under MPS the active-thread cap
//     (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, the share fraction a_i) bounds
//     it: u_i = min(d_i, a_i). Time-slicing enforces nothing: u_i = d_i.
//   - Own rate: a job capped below its demand runs at min(1, MPSCapGain *
//     u_i / d_i) of its solo whole-GPU speed, so a GPU-bound job's speed
//     grows with its shares and a job using 25% of a GPU runs no faster
//     with more than a quarter of it.
//   - Contention: the load L = sum of u_j over the GPU's sharers. Big
//     Brain's linear slowdown: when L exceeds the GPU, every sharer slows
//     by the factor min(1, eta/L), eta being TimeSliceEfficiency under
//     time-slicing with two or more sharers (context switches cost) and 1
//     under MPS or alone. Under MPS the caps keep L within the GPU as long
//     as the shares do (caravan never hands out more), so there sharing
//     costs a job nothing beyond its own cap; a bad pair shows under
//     time-slicing, or under MPS against whole-GPU rates.
//
// Calibration (device/README.md, "Verified on real hardware", an H100):
// two CPU-bound jobs (d = 0.25) give 2.0x combined throughput (measured
// 2.01x time-sliced, 1.96x MPS); two GPU-bound jobs (d = 1) give 0.91x
// time-sliced (measured 0.91x) and, under MPS with half-GPU limits, 1.13x
// (measured 1.13x).
package interference

import "math"

const (
	// TimeSliceEfficiency is the fraction of a time-sliced GPU left to
	// oversubscribed sharers (the H100's GPU-bound pair: 0.91x combined).
	TimeSliceEfficiency = 0.91
	// MPSCapGain is how much more a GPU-bound job does per SM under an
	// MPS thread cap than on the whole GPU (the H100's GPU-bound pair
	// under MPS with half-GPU limits: 1.13x combined).
	MPSCapGain = 1.13
)

// Sharer is one job on a GPU.
type Sharer struct {
	// Demand is the fraction of a whole GPU the job keeps busy alone, in
	// (0,1]; out-of-range values are bounded to it.
	Demand float64
	// Fraction is the job's share of the GPU (shares held / shares), in
	// (0,1]; 0 or less reads as the whole GPU.
	Fraction float64
}

func (s Sharer) bounded() Sharer {
	if !(s.Demand > 0) {
		s.Demand = 0.01
	}
	s.Demand = min(max(s.Demand, 0.01), 1)
	if !(s.Fraction > 0) || s.Fraction > 1 || math.IsNaN(s.Fraction) {
		s.Fraction = 1
	}
	return s
}

// use is what a sharer may take of the GPU.
func (s Sharer) use(mps bool) float64 {
	if mps {
		return min(s.Demand, s.Fraction)
	}
	return s.Demand
}

// Rate is the MODELLED speed of self, a fraction of its speed alone on the
// whole GPU, when it shares the GPU with others (mps: the GPU runs MPS,
// else time-slicing).
func Rate(self Sharer, others []Sharer, mps bool) float64 {
	self = self.bounded()
	u := self.use(mps)
	own := 1.0
	if u < self.Demand {
		own = min(1, MPSCapGain*u/self.Demand)
	}
	load := u
	for _, o := range others {
		load += o.bounded().use(mps)
	}
	eta := 1.0
	if !mps && len(others) > 0 {
		eta = TimeSliceEfficiency
	}
	return own * min(1, eta/load)
}

// CombinedGain is the sum of the sharers' MODELLED rates: the throughput of
// packing them on one GPU against running each alone on a whole GPU.
func CombinedGain(sharers []Sharer, mps bool) float64 {
	var sum float64
	for i := range sharers {
		others := make([]Sharer, 0, len(sharers)-1)
		others = append(others, sharers[:i]...)
		others = append(others, sharers[i+1:]...)
		sum += Rate(sharers[i], others, mps)
	}
	return sum
}
