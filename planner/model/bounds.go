package model

import "math"

// Bounded holds a predicted speed f for w workers, p parameter servers on n
// nodes within what the measured samples allow, so a fit from few or noisy
// samples can never predict the absurd:
//   - a measured shape predicts what was measured there;
//   - never more than linear gain over a measured shape: with w >= m.w
//     workers on n >= m.n nodes, f <= r_m * w/m.w * max(p/m.p, m.p/p)
//     (in every form a worker's share of a step's time cannot shrink as
//     workers or nodes are added, and a server count p changes the
//     synchronisation cost by at most p/m.p);
//   - never a speed below a measured one's scaled value: with w <= m.w
//     workers on n <= m.n nodes and the same servers, f >= r_m * w/m.w.
//
// A NaN, infinite or negative f counts as 0 (then only the lower bounds
// speak). Samples with no workers or no positive speed are ignored.
func Bounded(f float64, w, p, n int, measured []SpeedSample) float64 {
	if w <= 0 {
		return 0
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		f = 0
	}
	n = max(n, 1)
	lo := 0.0
	for _, m := range measured {
		r := m.StepsPerSec
		if m.Workers <= 0 || !(r > 0) || math.IsInf(r, 0) {
			continue
		}
		mn := max(m.Nodes, 1)
		scale := float64(w) / float64(m.Workers)
		if w == m.Workers && p == m.PS && n == mn {
			return r
		}
		if w >= m.Workers && n >= mn {
			if ub, ok := r*scale*psFactor(p, m.PS), (p > 0) == (m.PS > 0); ok {
				f = math.Min(f, ub)
			}
		}
		if w <= m.Workers && n <= mn && p == m.PS {
			lo = math.Max(lo, r*scale)
		}
	}
	return math.Max(f, lo)
}

// psFactor is the most a change from m to p parameter servers can speed a
// step up: max(p/m, m/p), 1 without servers.
func psFactor(p, m int) float64 {
	if p <= 0 || m <= 0 {
		return 1
	}
	return math.Max(float64(p)/float64(m), float64(m)/float64(p))
}
