package packsim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Profile is a job's GPU use. The Philly trace and the Pollux workloads
// record none, so every profile here is SYNTHETIC (Synthetic is always
// true), drawn from a Mix.
type Profile struct {
	// Compute is the fraction of a GPU's compute the job keeps busy alone
	// on a whole GPU; Memory the fraction of a GPU's memory at its peak.
	Compute, Memory float64
	// Declared is the shares per worker its jobspec declares: what it
	// needs, over-provisioned (Big Brain: developers cannot estimate GPU
	// needs and over-provision).
	Declared  int
	Synthetic bool
}

// band is a uniform range of compute and memory fractions.
type band struct{ cLo, cHi, mLo, mHi float64 }

// Mix is a profile distribution: weights of light, medium and heavy jobs.
type Mix struct {
	Name                 string
	Light, Medium, Heavy float64 // weights (normalised)
	// GPUBound draws every job from gpuBound instead.
	GPUBound bool
}

// The bands and mixes were fixed before any packing run was measured, from
// published figures (planner/POLICY.md, "Packing"):
//   - Big Brain (UIUC): clusters below 30% utilisation, and below 15% for a
//     third of users: the light band, a third of the base mix, is 2-15%.
//   - Philly (Jeon et al., USENIX ATC'19): the mean GPU utilisation of
//     jobs is about half a GPU (40-60% by job size): the base mix's mean
//     compute is (0.085 + 0.45 + 0.875) / 3 = 0.47.
//   - Gandiva (OSDI'18) packs because many jobs leave the GPU underused; its
//     +26% utilisation is a result, not an input here.
//
// Memory is not published per job in these sources: the bands below are
// SYNTHETIC guesses (lighter jobs hold less), stated as such.
var (
	light    = band{0.02, 0.15, 0.05, 0.30}
	medium   = band{0.15, 0.75, 0.10, 0.50}
	heavy    = band{0.75, 1.00, 0.20, 0.80}
	gpuBound = band{0.90, 1.00, 0.30, 0.80}
)

// Mixes are the variations: the base mix, a lighter and a heavier one,
// and an all-GPU-bound mix (where packing must not lose).
var Mixes = []Mix{
	{Name: "base", Light: 1, Medium: 1, Heavy: 1},
	{Name: "light", Light: 3, Medium: 2, Heavy: 1},
	{Name: "heavy", Light: 1, Medium: 2, Heavy: 3},
	{Name: "gpu-bound", GPUBound: true},
}

// MixNamed returns the mix of that name.
func MixNamed(name string) (Mix, error) {
	var names []string
	for _, m := range Mixes {
		if m.Name == name {
			return m, nil
		}
		names = append(names, m.Name)
	}
	return Mix{}, fmt.Errorf("unknown profile mix %q (want one of %s)", name, strings.Join(names, ", "))
}

// Draw is job i's profile in the mix, for seed: reproducible, independent
// of the other jobs. shares is the GPU's share count.
func (m Mix) Draw(seed uint64, i int, shares int) Profile {
	r := rand.New(rand.NewPCG(seed, uint64(i)+0x9e3779b97f4a7c15))
	b := gpuBound
	if !m.GPUBound {
		total := m.Light + m.Medium + m.Heavy
		switch u := r.Float64() * total; {
		case u < m.Light:
			b = light
		case u < m.Light+m.Medium:
			b = medium
		default:
			b = heavy
		}
	}
	p := Profile{Compute: b.cLo + r.Float64()*(b.cHi-b.cLo), Memory: b.mLo + r.Float64()*(b.mHi-b.mLo), Synthetic: true}
	need := NeedShares(p.Memory, shares)
	p.Declared = need + r.IntN(shares-need+1) // over-provisioned: anywhere from the need to a whole GPU
	return p
}

// NeedShares is the least share count whose memory holds a peak of memory
// (a fraction of the GPU) plus the right-sizing rule's 10% headroom.
func NeedShares(memory float64, shares int) int {
	return min(shares, max(1, int(math.Ceil(memory*1.1*float64(shares)-1e-9))))
}
