package manager

import (
	"time"

	"github.com/caravan-nomad/caravan/planner/rightsize"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/source"
)

// sizeMemory is what right-sizing remembers of a job between rounds.
type sizeMemory struct {
	// shares is the job's shares per worker as last seen, since when.
	shares int
	since  time.Time
	// measured is the throughput per worker at earlier share counts that
	// had enough evidence.
	measured map[int]float64
	// last is the newest recommendation at shares.
	last *rightsize.Recommendation
}

// rightsize recommends a job's shares per worker from its reports at the
// shares it holds (planner/POLICY.md, "Right-sizing"). It only recommends.
func (m *Manager) rightsize(now time.Time, k source.JobKey, j *source.Job, mm *memory, v *JobView, running int, snap source.Snapshot, s Settings) {
	sz := &mm.size
	shares := workerShares(j, s)
	if shares != sz.shares {
		if sz.last != nil && sz.last.Enough {
			if sz.measured == nil {
				sz.measured = map[int]float64{}
			}
			sz.measured[sz.shares] = sz.last.Evidence.PerWorker[sz.shares]
		}
		// A job first seen keeps the reports it already sent (a planner
		// restart does not change its size); a change starts afresh.
		if sz.shares != 0 {
			sz.since = now
		}
		sz.shares, sz.last = shares, nil
	}
	in := rightsize.Input{
		Shares: shares, SharesPerGPU: sharesPerGPU(snap, s), MemoryPerShareBytes: memoryPerShareMiB(snap) << 20,
		MinShares: j.Spec.MinGPUShares, MaxShares: j.Spec.MaxGPUShares, Measured: sz.measured,
	}
	for _, r := range m.cfg.Progress.Records(ingest.JobKey(k)) {
		if r.Time.Before(sz.since) {
			continue
		}
		w := r.Workers
		if w <= 0 {
			w = max(running, 1)
		}
		in.Reports = append(in.Reports, rightsize.Report{SamplesPerSec: r.SamplesPerSec, Workers: w, PeakBytes: r.GPUMemoryPeakBytes})
	}
	rec := rightsize.Recommend(in)
	sz.last = &rec
	v.Rightsize = &rec
}

// memoryPerShareMiB is the least memory one share holds on the ready
// nodes (0 when none reports it).
func memoryPerShareMiB(snap source.Snapshot) int64 {
	var least int64
	for _, n := range snap.Nodes {
		if n.Ready && n.MemoryPerShareMiB > 0 && (least == 0 || n.MemoryPerShareMiB < least) {
			least = n.MemoryPerShareMiB
		}
	}
	return least
}
