// Package rightsize recommends the GPU shares one worker of a job needs,
// from what the job measured at the shares it holds: the peak GPU memory
// its worker processes allocated and its throughput per worker at each
// share count it ran at. It only recommends; nothing here changes a job.
// The rule and its evidence thresholds are stated in planner/POLICY.md
// ("Right-sizing").
package rightsize

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Evidence thresholds and margins of the rule (planner/POLICY.md).
const (
	// MinReports is N: progress reports with a positive throughput at the
	// current share count before a recommendation is made.
	MinReports = 5
	// MinMemorySamples is M: of those, reports that carry the worker's
	// peak GPU memory (gpu_memory_peak_bytes).
	MinMemorySamples = 3
	// Headroom is added to the peak before it is divided into shares:
	// torch's max_memory_allocated leaves out the CUDA context and the
	// allocator's cache.
	Headroom = 0.10
	// Flat is the fraction of the best measured throughput per worker at
	// which a share count counts as fast as the best.
	Flat = 0.90
)

// Report is one progress report at the current share count.
type Report struct {
	// SamplesPerSec is the job's reported throughput and Workers the
	// workers that produced it (at least 1).
	SamplesPerSec float64
	Workers       int
	// PeakBytes is the reported peak GPU memory of a worker process (0:
	// not measured).
	PeakBytes int64
}

// Input is what the rule knows of one job.
type Input struct {
	// Shares is the GPU shares one worker holds now.
	Shares int
	// SharesPerGPU and MemoryPerShareBytes describe the cluster's GPUs
	// (the smallest share when GPUs differ).
	SharesPerGPU        int
	MemoryPerShareBytes int64
	// MinShares and MaxShares are caravan_min_gpu_shares and
	// caravan_max_gpu_shares (0: unset).
	MinShares, MaxShares int
	// Reports are the job's reports since it holds Shares.
	Reports []Report
	// Measured is the throughput per worker (samples/s) measured at
	// earlier share counts with enough evidence; the current count's is
	// taken from Reports.
	Measured map[int]float64
	// OOMShares is the largest share count at which the job ran out of
	// GPU memory (0: never): no recommendation goes back to it or below.
	OOMShares int
}

// Evidence is what a recommendation rests on.
type Evidence struct {
	Reports       int `json:"reports"`
	MemorySamples int `json:"memory_samples"`
	// PeakBytes is the largest reported peak, capped at one GPU's memory
	// (PeakCapped: a report claimed more).
	PeakBytes           int64 `json:"gpu_memory_peak_bytes,omitempty"`
	PeakCapped          bool  `json:"peak_capped,omitempty"`
	MemoryPerShareBytes int64 `json:"memory_per_share_bytes,omitempty"`
	// MemoryShares is the least share count whose memory holds the peak
	// plus Headroom; ThroughputShares the least that measured throughput
	// allows (1 when no smaller count was measured slower).
	MemoryShares     int `json:"memory_shares,omitempty"`
	ThroughputShares int `json:"throughput_shares,omitempty"`
	// PerWorker is the median throughput per worker (samples/s) measured
	// at each share count.
	PerWorker map[int]float64 `json:"samples_per_sec_per_worker_by_shares,omitempty"`
	// OOMShares is the largest share count the job ran out of GPU memory at.
	OOMShares int `json:"oom_shares,omitempty"`
}

// Want is the share count the evidence asks for before any bound.
func (e Evidence) Want() int { return max(e.MemoryShares, e.ThroughputShares, e.OOMShares+1) }

// Recommendation is the rule's answer for one job.
type Recommendation struct {
	CurrentShares int `json:"current_shares"`
	// Shares is the recommended shares per worker; 0 when there is none
	// (Reason says why).
	Shares   int      `json:"shares,omitempty"`
	Enough   bool     `json:"enough_evidence"`
	Reason   string   `json:"reason"`
	Evidence Evidence `json:"evidence"`
}

// Recommend applies the rule.
func Recommend(in Input) Recommendation {
	r := Recommendation{CurrentShares: in.Shares}
	switch {
	case in.Shares <= 0:
		r.Reason = "the job's workers hold no GPU shares"
		return r
	case in.SharesPerGPU <= 0 || in.MemoryPerShareBytes <= 0:
		r.Reason = "no ready node reports its GPUs' memory per share (the device plugin's memory_per_share attribute)"
		return r
	case in.Shares > in.SharesPerGPU:
		r.Reason = fmt.Sprintf("a worker holds %d shares, more than one GPU's %d: right-sizing covers one GPU or less",
			in.Shares, in.SharesPerGPU)
		return r
	}
	ev := &r.Evidence
	ev.MemoryPerShareBytes = in.MemoryPerShareBytes
	ev.OOMShares = in.OOMShares
	var rates []float64
	for _, rep := range in.Reports {
		if rep.SamplesPerSec <= 0 || math.IsNaN(rep.SamplesPerSec) || math.IsInf(rep.SamplesPerSec, 0) {
			continue
		}
		ev.Reports++
		rates = append(rates, rep.SamplesPerSec/float64(max(rep.Workers, 1)))
		if rep.PeakBytes > 0 {
			ev.MemorySamples++
			ev.PeakBytes = max(ev.PeakBytes, rep.PeakBytes)
		}
	}
	if ev.Reports < MinReports || ev.MemorySamples < MinMemorySamples {
		r.Reason = fmt.Sprintf("not enough evidence at %d shares: %d of %d progress reports, %d of %d with the peak GPU memory",
			in.Shares, ev.Reports, MinReports, ev.MemorySamples, MinMemorySamples)
		return r
	}
	r.Enough = true
	gpu := int64(in.SharesPerGPU) * in.MemoryPerShareBytes
	if ev.PeakBytes > gpu {
		ev.PeakBytes, ev.PeakCapped = gpu, true
	}
	ev.MemoryShares = max(1, int(math.Ceil(float64(ev.PeakBytes)*(1+Headroom)/float64(in.MemoryPerShareBytes))))
	ev.PerWorker = map[int]float64{}
	for k, v := range in.Measured {
		if k > 0 && v > 0 && k != in.Shares {
			ev.PerWorker[k] = v
		}
	}
	ev.PerWorker[in.Shares] = median(rates)
	ev.ThroughputShares = throughputFloor(ev.PerWorker)
	r.Shares, r.Reason = bound(in, ev.Want(), r.Evidence)
	return r
}

// throughputFloor is the least share count the measured throughput allows:
// the smallest measured count within Flat of the best, or 1 when that is
// the smallest count measured (no smaller count was seen to be slower).
func throughputFloor(perWorker map[int]float64) int {
	sizes := make([]int, 0, len(perWorker))
	best := 0.0
	for k, v := range perWorker {
		sizes = append(sizes, k)
		best = math.Max(best, v)
	}
	sort.Ints(sizes)
	for i, k := range sizes {
		if perWorker[k] >= Flat*best {
			if i == 0 {
				return 1
			}
			return k
		}
	}
	return sizes[len(sizes)-1]
}

// bound keeps want within [1, the GPU's share count] and the job's
// caravan_min_gpu_shares / caravan_max_gpu_shares, and explains the result.
func bound(in Input, want int, ev Evidence) (int, string) {
	var why []string
	peak := fmt.Sprintf("peak GPU memory %s", mib(ev.PeakBytes))
	if ev.PeakCapped {
		peak += " (a report claimed more than one GPU's memory: capped)"
	}
	why = append(why, fmt.Sprintf("%s needs %d share(s) of %s with %.0f%% headroom", peak, ev.MemoryShares,
		mib(in.MemoryPerShareBytes), Headroom*100))
	switch {
	case ev.ThroughputShares > 1:
		why = append(why, fmt.Sprintf("throughput per worker fell by more than %.0f%% below %d shares", (1-Flat)*100, ev.ThroughputShares))
	case len(ev.PerWorker) == 1:
		why = append(why, fmt.Sprintf("throughput measured at %d shares only: unknown at fewer", in.Shares))
	default:
		why = append(why, "no smaller share count was measured slower")
	}
	if ev.OOMShares > 0 {
		why = append(why, fmt.Sprintf("the job ran out of GPU memory at %d share(s)", ev.OOMShares))
	}
	got, limit := Bounds{SharesPerGPU: in.SharesPerGPU, Min: in.MinShares, Max: in.MaxShares}.Clamp(want)
	if limit != "" {
		why = append(why, "bounded by "+limit)
	}
	return got, strings.Join(why, "; ")
}

// Bounds are the limits on a worker's share count: 1 and one GPU's shares,
// and the job's caravan_min_gpu_shares / caravan_max_gpu_shares (0: unset).
type Bounds struct {
	SharesPerGPU int
	Min, Max     int
}

// Clamp keeps want within the bounds and names the bound that moved it
// ("" when none did).
func (b Bounds) Clamp(want int) (int, string) {
	lo, hi := 1, max(b.SharesPerGPU, 1)
	if b.Max > 0 && b.Max < hi {
		hi = b.Max
	}
	if b.Min > lo {
		lo = min(b.Min, hi)
	}
	got := min(max(want, lo), hi)
	switch {
	case got < want && hi == b.Max:
		return got, fmt.Sprintf("caravan_max_gpu_shares = %d", b.Max)
	case got < want:
		return got, fmt.Sprintf("the GPU's %d shares", hi)
	case got > want:
		return got, fmt.Sprintf("caravan_min_gpu_shares = %d", b.Min)
	}
	return got, ""
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func mib(b int64) string { return fmt.Sprintf("%d MiB", b>>20) }

// PeakMiB and MemoryPerShareMiB are the evidence's memory in MiB (for
// pages).
func (e Evidence) PeakMiB() int64           { return e.PeakBytes >> 20 }
func (e Evidence) MemoryPerShareMiB() int64 { return e.MemoryPerShareBytes >> 20 }

// Regrowth is the answer to a job whose worker ran out of GPU memory.
type Regrowth struct {
	From int `json:"from"`
	// To is the share count to grow to; To == From: it cannot grow.
	To int `json:"to"`
	// PeakBytes is the peak GPU memory the failing worker reported (0:
	// not reported).
	PeakBytes int64 `json:"gpu_memory_peak_bytes,omitempty"`
	// Reason says why To, or why the job cannot grow.
	Reason string `json:"reason"`
}

// Regrow is the share count a worker that ran out of GPU memory at shares
// grows to: twice its shares, or more where the peak it reported (what it
// had allocated when it failed) plus Headroom needs more, within b. To ==
// From when b leaves no room to grow; Reason then names the bound.
func Regrow(shares int, peakBytes, memoryPerShareBytes int64, b Bounds) Regrowth {
	g := Regrowth{From: shares, To: shares, PeakBytes: peakBytes}
	want := max(2*shares, shares+1)
	why := fmt.Sprintf("ran out of GPU memory at %d share(s): twice the shares", shares)
	if peakBytes > 0 && memoryPerShareBytes > 0 {
		need := int(math.Ceil(float64(peakBytes) * (1 + Headroom) / float64(memoryPerShareBytes)))
		if need > want {
			want = need
			why = fmt.Sprintf("ran out of GPU memory at %d share(s) with %s allocated: %d share(s) of %s hold it with %.0f%% headroom",
				shares, mib(peakBytes), need, mib(memoryPerShareBytes), Headroom*100)
		}
	}
	got, limit := b.Clamp(want)
	if got <= shares {
		bound := limit
		if bound == "" {
			bound = fmt.Sprintf("the GPU's %d shares", max(b.SharesPerGPU, 1))
		}
		g.Reason = fmt.Sprintf("ran out of GPU memory at %d share(s) and cannot grow: %s", shares, bound)
		return g
	}
	g.To = got
	g.Reason = why
	if limit != "" {
		g.Reason += "; bounded by " + limit
	}
	return g
}
