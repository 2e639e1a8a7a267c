// Package packsim is the simulator of GPU packing (issue 31, item 3): jobs
// with a per-job GPU-use profile share GPUs under three policies (whole
// GPUs; static packing at declared shares; right-sizing plus introspective
// packing through planner/packing), and a MODELLED interference model says
// how fast each job runs next to its neighbours. Nothing here is measured:
// the model is calibrated against the H100 figures in device/README.md and
// Big Brain's linear slowdown, and the profiles are SYNTHETIC, drawn from a
// distribution fixed from published utilisation figures (profiles.go).
package packsim

import "math"

// Interference model (MODELLED). Calibration and sources:
//
//   - H100 80GB, device/README.md "Verified on real hardware", two copies of
//     one small CNN: a CPU-bound pair (batch 128) ran at 2.01x combined
//     throughput time-sliced and 1.96x under MPS (50% of the SMs each); a
//     GPU-bound pair (batch 2048) at 0.91x time-sliced and 1.13x under MPS.
//     ("Combined" is the sum of each job's speed over its exclusive speed.)
//   - Big Brain (UIUC): a job's processing time grows linearly with the
//     concurrency factor (jobs per GPU) once the GPU is saturated.
//
// A job's profile has Compute c, the fraction of a GPU's compute its
// kernels keep busy when it runs alone on a whole GPU (a GPU-bound job is
// c = 1, the batch-128 CPU-bound job c well below 0.5). On a GPU shared by
// jobs whose demands sum to D = sum(c):
//
//   - time-sliced: each job runs at min(1, 1 / (D x (1 + TSSwitch x
//     clamp(D-1, 0, 1)))): below saturation (D <= 1) nobody slows down (the
//     CPU-bound pair: 2.00 modelled, 2.01 measured); saturated, the GPU is
//     shared in proportion and context switches cost TSSwitch (the
//     GPU-bound pair: 2 x 1/(2 x 1.0989) = 0.91). For k copies of one job,
//     time = k x c x 1.0989 once k x c >= 2: Big Brain's linear slowdown in
//     the concurrency factor k.
//   - MPS: each client is capped at its shares' fraction of the SMs
//     (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = shares/count, as the device
//     plugin sets it) and, saturated, gets its demand's part of the GPU:
//     a = min(cap, c / max(D, 1)); it runs at (1 - MPSClient) x min(1,
//     MPSCapacity x a / c) when packed, min(1, MPSCapacity x cap / c) alone.
//     Calibrated: the CPU-bound pair 2 x 0.98 = 1.96; the GPU-bound pair
//     with half the SMs each 2 x 0.98 x min(1, 1.1531 x 0.5) = 1.13.
const (
	// TSSwitch is the time-slicing context-switch cost at saturation:
	// 1/0.91 - 1 (the GPU-bound pair's 0.91x).
	TSSwitch = 1/0.91 - 1
	// MPSClient is the per-client cost of sharing under MPS: 1 - 1.96/2.
	MPSClient = 1 - 1.96/2
	// MPSCapacity is the work MPS gets from a GPU that saturated clients
	// share, relative to one client alone: 1.13 / (2 x 0.98 x 0.5).
	MPSCapacity = 1.13 / (2 * (1 - MPSClient) * 0.5)
)

// resident is one worker on a GPU: its job's profile and the shares it holds.
type resident struct {
	compute float64
	shares  int
}

// workerRates is each resident's speed on one GPU (1 = its speed alone on
// a whole GPU), in resident order, under the model above.
func workerRates(mps bool, gpuShares int, res []resident, out []float64) []float64 {
	out = out[:0]
	d := 0.0
	for _, r := range res {
		d += r.compute
	}
	for _, r := range res {
		c := math.Max(r.compute, 1e-6)
		if !mps {
			if len(res) == 1 {
				out = append(out, 1)
				continue
			}
			sw := 1 + TSSwitch*math.Min(math.Max(d-1, 0), 1)
			out = append(out, math.Min(1, 1/(d*sw)))
			continue
		}
		capFrac := float64(r.shares) / float64(gpuShares)
		if len(res) == 1 {
			out = append(out, math.Min(1, MPSCapacity*capFrac/c))
			continue
		}
		a := math.Min(capFrac, c/math.Max(d, 1))
		out = append(out, (1-MPSClient)*math.Min(1, MPSCapacity*a/c))
	}
	return out
}

// PairGain is the modelled combined gain of two jobs of computes c1 and c2
// sharing one GPU at shares s1 and s2 of gpuShares (for tests and docs).
func PairGain(mps bool, gpuShares int, c1, c2 float64, s1, s2 int) float64 {
	r := workerRates(mps, gpuShares, []resident{{c1, s1}, {c2, s2}}, nil)
	a1 := workerRates(mps, gpuShares, []resident{{c1, gpuShares}}, nil)[0]
	a2 := workerRates(mps, gpuShares, []resident{{c2, gpuShares}}, nil)[0]
	return r[0]/a1 + r[1]/a2
}
