package trainer

import "math"

// splitmix64 is the whole source of randomness: a counter-based generator,
// so sample i or batch slot j of step s is a pure function of (seed, i) or
// (seed, s, j) and never depends on how the run was interrupted.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// mix hashes a tuple of words into one.
func mix(words ...uint64) uint64 {
	h := uint64(0x6a09e667f3bcc908)
	for _, w := range words {
		h = splitmix64(h ^ w)
	}
	return h
}

// unit maps a hash to [0,1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

// symmetric maps a hash to [-1,1).
func symmetric(h uint64) float64 { return 2*unit(h) - 1 }

// gaussian maps two hashes to a standard normal sample (Box-Muller).
func gaussian(h1, h2 uint64) float64 {
	u1 := unit(h1)
	if u1 < 1e-300 {
		u1 = 1e-300
	}
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*unit(h2))
}
