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
	// last is the newest recommendation at shares, and key what it was
	// computed from (a round with the same key reuses it).
	last *rightsize.Recommendation
	key  sizeKey
	// oomShares is the largest share count the job ran out of GPU memory
	// at: no recommendation goes back to it.
	oomShares int
	// pending is the share count of a resize written and not yet seen in
	// Nomad (0: none), since pendingAt, for pendingCause.
	pending      int
	pendingAt    time.Time
	pendingCause string
	// oomSeen is the time of the newest out-of-memory report a regrowth
	// was decided on: each report is acted on once.
	oomSeen time.Time
	// oomAnswered are the allocations whose running out of memory a
	// regrowth answered: their report and their exit (the driver's event)
	// are one failure, acted on once.
	oomAnswered map[string]bool
	// announced are the refusals and waits whose events were written.
	announced map[string]bool
}

// gpuShape is the cluster's GPUs as right-sizing sees them: shares per
// GPU and the least memory of a share.
type gpuShape struct {
	perGPU            int
	memoryPerShareMiB int64
}

// sizeKey is what a recommendation depends on besides the measured sizes.
type sizeKey struct {
	records, running  int
	newest            time.Time
	perGPU, min, max  int
	memoryPerShareMiB int64
	oom               int
}

// rightsize recommends a job's shares per worker from its reports at the
// shares it holds (planner/POLICY.md, "Right-sizing"). It only recommends.
func (m *Manager) rightsize(now time.Time, j *source.Job, mm *memory, v *JobView, running int, recs []ingest.Record, gpus gpuShape, s Settings) {
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
			// Speeds measured at the old size do not hold at the new one:
			// the policy's speed model starts afresh.
			mm.speed = map[shape]float64{}
		}
		sz.shares, sz.last = shares, nil
	}
	key := sizeKey{records: len(recs), running: running, perGPU: gpus.perGPU,
		min: j.Spec.MinGPUShares, max: j.Spec.MaxGPUShares, memoryPerShareMiB: gpus.memoryPerShareMiB, oom: sz.oomShares}
	if len(recs) > 0 {
		key.newest = recs[len(recs)-1].Time
	}
	if sz.last == nil || key != sz.key {
		rec := rightsize.Recommend(sizeInput(shares, key, sz, recs))
		sz.last, sz.key = &rec, key
	}
	v.Rightsize = sz.last
}

// sizeInput is the rule's input: the reports since the job holds shares.
func sizeInput(shares int, key sizeKey, sz *sizeMemory, recs []ingest.Record) rightsize.Input {
	in := rightsize.Input{
		Shares: shares, SharesPerGPU: key.perGPU, MemoryPerShareBytes: key.memoryPerShareMiB << 20,
		MinShares: key.min, MaxShares: key.max, Measured: sz.measured, OOMShares: key.oom,
	}
	for _, r := range recs {
		if r.Time.Before(sz.since) {
			continue
		}
		w := r.Workers
		if w <= 0 {
			w = max(key.running, 1)
		}
		in.Reports = append(in.Reports, rightsize.Report{SamplesPerSec: r.SamplesPerSec, Workers: w, PeakBytes: r.GPUMemoryPeakBytes})
	}
	return in
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
