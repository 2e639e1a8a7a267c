package rightsize

import (
	"testing"

	"github.com/shoenig/test/must"
)

const gib = int64(1) << 30

// reports returns n reports of flat throughput, the first mem of them
// carrying peak.
func reports(n, mem int, peak int64) []Report {
	out := make([]Report, n)
	for i := range out {
		out[i] = Report{SamplesPerSec: 200, Workers: 2}
		if i < mem {
			out[i].PeakBytes = peak
		}
	}
	return out
}

func TestRecommend(t *testing.T) {
	// A GPU of 40 GiB in 4 shares of 10 GiB.
	base := Input{Shares: 4, SharesPerGPU: 4, MemoryPerShareBytes: 10 * gib}
	with := func(f func(*Input)) Input {
		in := base
		f(&in)
		return in
	}
	cases := []struct {
		name   string
		in     Input
		shares int
		enough bool
		reason string
	}{
		{"declares 4, uses 1 share's memory, flat throughput: 1",
			with(func(in *Input) { in.Reports = reports(MinReports, MinMemorySamples, 8*gib) }), 1, true,
			"needs 1 share(s) of 10240 MiB with 10% headroom; throughput measured at 4 shares only: unknown at fewer"},
		{"one report short: none",
			with(func(in *Input) { in.Reports = reports(MinReports-1, MinMemorySamples, 8*gib) }), 0, false, "4 of 5 progress reports"},
		{"one memory sample short: none",
			with(func(in *Input) { in.Reports = reports(MinReports+5, MinMemorySamples-1, 8*gib) }), 0, false, "2 of 3 with the peak"},
		{"reports without throughput do not count",
			with(func(in *Input) {
				in.Reports = append(reports(MinReports-1, MinMemorySamples, 8*gib), Report{PeakBytes: gib})
			}), 0, false, "4 of 5"},
		{"19 GiB with headroom needs 3 of 10 GiB",
			with(func(in *Input) { in.Reports = reports(MinReports, MinMemorySamples, 19*gib) }), 3, true, "needs 3 share(s)"},
		{"max meta bounds",
			with(func(in *Input) {
				in.MaxShares = 2
				in.Reports = reports(MinReports, MinMemorySamples, 35*gib)
			}), 2, true, "bounded by caravan_max_gpu_shares = 2"},
		{"min meta bounds",
			with(func(in *Input) {
				in.MinShares = 2
				in.Reports = reports(MinReports, MinMemorySamples, gib)
			}), 2, true, "bounded by caravan_min_gpu_shares = 2"},
		{"min meta above the GPU's shares: the GPU bounds",
			with(func(in *Input) {
				in.MinShares = 9
				in.Reports = reports(MinReports, MinMemorySamples, gib)
			}), 4, true, "bounded by caravan_min_gpu_shares"},
		{"a lying peak is capped at one GPU",
			with(func(in *Input) {
				in.Shares = 1
				in.Reports = reports(MinReports, MinMemorySamples, 1<<44)
			}), 4, true, "capped"},
		{"a smaller size measured slower keeps the shares",
			with(func(in *Input) {
				in.Measured = map[int]float64{2: 40} // current: 100 per worker
				in.Reports = reports(MinReports, MinMemorySamples, 8*gib)
			}), 4, true, "fell by more than 10% below 4 shares"},
		{"a smaller size measured as fast allows shrinking",
			with(func(in *Input) {
				in.Measured = map[int]float64{2: 95}
				in.Reports = reports(MinReports, MinMemorySamples, 8*gib)
			}), 1, true, "no smaller share count was measured slower"},
		{"more than one GPU per worker: none",
			with(func(in *Input) {
				in.Shares = 8
				in.Reports = reports(MinReports, MinMemorySamples, 8*gib)
			}), 0, false, "more than one GPU's 4"},
		{"no memory per share known: none",
			with(func(in *Input) {
				in.MemoryPerShareBytes = 0
				in.Reports = reports(MinReports, MinMemorySamples, 8*gib)
			}), 0, false, "memory_per_share"},
		{"no shares: none", Input{SharesPerGPU: 4, MemoryPerShareBytes: gib}, 0, false, "hold no GPU shares"},
		{"never back to a size that ran out of GPU memory",
			with(func(in *Input) {
				in.OOMShares = 2
				in.Reports = reports(MinReports, MinMemorySamples, 8*gib)
			}), 3, true, "ran out of GPU memory at 2 share(s)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Recommend(tc.in)
			must.Eq(t, tc.shares, r.Shares, must.Sprint(r.Reason))
			must.Eq(t, tc.enough, r.Enough)
			must.StrContains(t, r.Reason, tc.reason)
			must.Eq(t, tc.in.Shares, r.CurrentShares)
		})
	}
}

// TestRecommend_Evidence checks the evidence a recommendation shows.
func TestRecommend_Evidence(t *testing.T) {
	r := Recommend(Input{Shares: 4, SharesPerGPU: 4, MemoryPerShareBytes: 10 * gib,
		Reports: append(reports(MinReports, MinMemorySamples, 8*gib), Report{SamplesPerSec: 300, Workers: 1, PeakBytes: 9 * gib})})
	must.Eq(t, Evidence{Reports: 6, MemorySamples: 4, PeakBytes: 9 * gib, MemoryPerShareBytes: 10 * gib,
		MemoryShares: 1, ThroughputShares: 1, PerWorker: map[int]float64{4: 100}}, r.Evidence)
}

func TestRegrow(t *testing.T) {
	gpu := Bounds{SharesPerGPU: 4}
	cases := []struct {
		name   string
		shares int
		peak   int64
		b      Bounds
		to     int
		reason string
	}{
		{"1 share doubles to 2", 1, 0, gpu, 2, "twice the shares"},
		{"a peak that needs more than twice", 1, 25 * gib, gpu, 3, "25600 MiB allocated: 3 share(s)"},
		{"3 shares grow to the GPU's 4", 3, 0, gpu, 4, "bounded by the GPU's 4 shares"},
		{"a whole GPU cannot grow", 4, 0, gpu, 4, "cannot grow: the GPU's 4 shares"},
		{"max meta bounds the growth", 1, 0, Bounds{SharesPerGPU: 4, Max: 1}, 1, "cannot grow: caravan_max_gpu_shares = 1"},
		{"max meta above the shares: grows to it", 1, 35 * gib, Bounds{SharesPerGPU: 4, Max: 3}, 3, "bounded by caravan_max_gpu_shares = 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := Regrow(tc.shares, tc.peak, 10*gib, tc.b)
			must.Eq(t, tc.shares, g.From)
			must.Eq(t, tc.to, g.To, must.Sprint(g.Reason))
			must.StrContains(t, g.Reason, tc.reason)
		})
	}
}
