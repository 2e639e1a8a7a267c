package packsim

import (
	"fmt"

	"github.com/caravan-nomad/caravan/planner/history"
	"github.com/caravan-nomad/caravan/planner/packing"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/rightsize"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
)

// GPUMemoryBytes is the simulated GPU's memory (an H100 80GB's 81559 MiB).
const GPUMemoryBytes = 81559 << 20

// fixedSize: every policy here runs a job at exactly its workers, all or
// nothing; what differs is the shares per worker and who shares a GPU.
var fixedSize = policy.Traits{FixedSize: true}

// decide runs one round of the policy at now and reports whether it
// changed anything (the next round then comes one interval later, to
// measure the change).
func (s *sim) decide(now float64) (bool, error) {
	changed := false
	switch s.pol {
	case Static:
		changed = s.decideStatic()
	default:
		if s.pol == Introspective {
			changed = s.rightsize()
		}
		c, err := s.decidePacking(now)
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	for _, j := range s.running {
		s.neighbourhood(j)
	}
	return changed, nil
}

// view is job j as the packing policy sees it: built through
// history.Record.PolicyJob like every policy job, then what the packing
// policy reads besides (declared shares, measured rates).
func (s *sim) view(j *job, now float64) packing.Job {
	v := packing.FromPolicy(s.policyJob(j, now), s.cfg.Shares)
	v.Shares = j.shares // exact: GPUMilli rounds for share counts that do not divide 1000
	v.Declared, v.Never = j.spec.Profile.Declared, j.spec.Never
	if s.pol == WholeGPU {
		v.Declared, v.Never = s.cfg.Shares, true
	}
	v.GPUs, v.Placed = j.gpus, j.placed
	if s.pol == Introspective {
		v.Solo, v.Packed, v.PackedRounds, v.Avoid = j.solo, j.packed, j.packRounds, j.avoid
		v.PeakMemoryBytes = int64(j.spec.Profile.Memory * GPUMemoryBytes)
		if j.histN > 0 {
			v.History, v.HistoryN = j.histSum/float64(j.histN), j.histN
		}
	}
	return v
}

// policyJob is job j's history (history.Record) at its declared size, all
// or nothing, one worker's demand its GPU shares.
func (s *sim) policyJob(j *job, now float64) policy.Job {
	w := j.spec.Workers
	cur := 0
	if len(j.gpus) > 0 {
		cur = w
	}
	rec := history.Record{ID: j.spec.ID, Kind: j.spec.Kind, Submitted: engine.At(j.spec.Submit), Now: engine.At(now),
		Attained: j.attained, Restarts: j.restarts, Current: policy.Allocation{Workers: cur},
		RestartCost: engine.Seconds(engine.RestartPenalty)}
	return rec.PolicyJob(fixedSize, history.Request{Requested: w, Min: w, Max: w, Gang: true,
		Worker: policy.Demand{GPUMilli: j.shares * policy.MilliGPU / s.cfg.Shares}})
}

// decidePacking runs planner/packing over the running jobs and the first
// Backfill waiting ones, and applies its decisions. The whole-GPU policy
// runs it too, every job at a whole GPU and opted out of packing.
func (s *sim) decidePacking(now float64) (bool, error) {
	if len(s.waiting) == 0 && !s.anyShared() {
		return false, nil
	}
	if s.gpus == nil {
		s.gpus = make([]packing.GPU, s.cfg.GPUs)
		for g := range s.gpus {
			s.gpus[g] = packing.GPU{ID: fmt.Sprintf("gpu-%05d", g), Shares: s.cfg.Shares, MPS: s.cfg.MPS}
		}
		s.byID = map[string]*job{}
	}
	in := packing.Input{GPUs: s.gpus, Jobs: s.views[:0]}
	byID := s.byID
	clear(byID)
	for _, j := range s.running {
		in.Jobs = append(in.Jobs, s.view(j, now))
		byID[j.spec.ID] = j
	}
	for _, j := range s.waiting[:min(len(s.waiting), s.cfg.Backfill)] {
		in.Jobs = append(in.Jobs, s.view(j, now))
		byID[j.spec.ID] = j
	}
	s.views = in.Jobs
	plan, err := packing.Decide(s.cfg.Packing, in)
	if err != nil {
		return false, err
	}
	changed := false
	admitted := map[*job]bool{}
	var suspended []*job
	for _, d := range plan.Decisions {
		j := byID[d.Job]
		switch d.Kind {
		case packing.Admit:
			s.start(j, d.GPUs)
			admitted[j], changed = true, true
			if len(d.Neighbours) > 0 {
				s.out.Packs++
			}
		case packing.Migrate, packing.Suspend:
			s.out.Unpacks++
			changed = true
			j.avoid = append(j.avoid, d.Neighbours...)
			for _, id := range d.Neighbours {
				if o := byID[id]; o != nil {
					o.avoid = append(o.avoid, j.spec.ID)
				}
			}
			s.stop(j)
			if d.Kind == packing.Migrate {
				s.start(j, d.GPUs)
			} else {
				suspended = append(suspended, j)
			}
		}
	}
	if changed {
		keep := append(suspended, s.waiting[:0:0]...)
		for _, j := range s.waiting {
			if !admitted[j] {
				keep = append(keep, j)
			}
		}
		s.waiting = keep
	}
	return changed, nil
}

func (s *sim) anyShared() bool {
	for _, r := range s.res {
		if len(r) > 1 {
			return true
		}
	}
	return false
}

// decideStatic packs the first Backfill waiting jobs, in order, at their
// declared shares: each worker on the fullest GPU it fits (best fit), its
// workers on distinct GPUs. It never measures and never unpacks.
func (s *sim) decideStatic() bool {
	changed := false
	keep := s.waiting[:0]
	for k, j := range s.waiting {
		if k >= s.cfg.Backfill {
			keep = append(keep, s.waiting[k:]...)
			break
		}
		if gpus := s.bestFit(j); gpus != nil {
			shared := false
			for _, g := range gpus {
				shared = shared || len(s.res[g]) > 0
			}
			if shared {
				s.out.Packs++
			}
			s.start(j, gpus)
			changed = true
			continue
		}
		keep = append(keep, j)
	}
	clear(s.waiting[len(keep):])
	s.waiting = keep
	return changed
}

func (s *sim) bestFit(j *job) []int {
	var gpus []int
	taken := map[int]bool{}
	for w := 0; w < j.spec.Workers; w++ {
		best := -1
		for g, f := range s.free {
			if f >= j.shares && !taken[g] && (best < 0 || f < s.free[best]) {
				best = g
				if f == j.shares {
					break
				}
			}
		}
		if best < 0 {
			return nil
		}
		taken[best] = true
		gpus = append(gpus, best)
	}
	return gpus
}

// rightsize applies planner/rightsize's recommendation to every running
// job alone on its GPUs with enough evidence at its current shares (on MPS
// GPUs no lower than packing.ComputeShares of its measured SM use): the
// simulated job sends one progress report every 10 s of progress with its
// peak memory, so one measured round is N = 5 reports. A resize is a
// checkpointed restart at the new shares on the same GPUs (shrinking
// always fits; a growth that does not fit waits).
func (s *sim) rightsize() bool {
	changed := false
	for _, j := range append([]*job(nil), s.running...) {
		if j.soloRounds < 1 || j.checkedShares == j.shares || !s.alone(j) {
			continue
		}
		peak := int64(j.spec.Profile.Memory * GPUMemoryBytes)
		var reps []rightsize.Report
		for k := 0; k < rightsize.MinReports; k++ {
			reps = append(reps, rightsize.Report{SamplesPerSec: j.solo * float64(j.spec.Workers), Workers: j.spec.Workers, PeakBytes: peak})
		}
		rec := rightsize.Recommend(rightsize.Input{Shares: j.shares, SharesPerGPU: s.cfg.Shares,
			MemoryPerShareBytes: GPUMemoryBytes / int64(s.cfg.Shares), Reports: reps, Measured: j.soloAt})
		j.checkedShares = j.shares
		want := rec.Shares
		if s.cfg.MPS {
			// the SMs it keeps busy alone: its compute times its speed
			want = max(want, packing.ComputeShares(j.spec.Profile.Compute*j.solo/100, s.cfg.Shares))
		}
		if !rec.Enough || want == j.shares {
			continue
		}
		if !s.fits(j, want) {
			continue
		}
		gpus := append([]int(nil), j.gpus...)
		s.stop(j)
		j.shares = want
		j.solo, j.soloRounds = 0, 0
		s.start(j, gpus)
		s.out.Resizes++
		changed = true
	}
	return changed
}

func (s *sim) fits(j *job, shares int) bool {
	for _, g := range j.gpus {
		if s.free[g]+j.shares < shares {
			return false
		}
	}
	return true
}
