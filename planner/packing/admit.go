package packing

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// candidate is a shared GPU a worker may join.
type candidate struct {
	gpu     int
	gain    float64 // predicted combined gain; NaN when a job on it is unmeasured
	explore bool    // admitted at declared shares, not by gain
	nb      []string
}

// place moves the unpacked jobs (to free GPUs, else suspends them), then
// admits the waiting jobs in order.
func (s *state) place(p *Plan, victims []int) {
	at := map[string]int{}
	for k, d := range p.Decisions {
		if d.Kind == "" {
			at[d.Job] = k
		}
	}
	for _, i := range victims {
		j := &s.in.Jobs[i]
		d := &p.Decisions[at[j.ID]]
		if len(s.empty) >= j.Workers {
			d.Kind, d.GPUs = Migrate, s.takeEmpty(i, j.Workers)
			d.Reason += fmt.Sprintf("; migrated to %d free GPU(s)", j.Workers)
		} else {
			d.Kind = Suspend
			d.Reason += fmt.Sprintf("; suspended: %d free GPU(s) for %d worker(s)", len(s.empty), j.Workers)
		}
	}
	demand := 0 // workers still waiting, this job's included
	for i := range s.in.Jobs {
		if len(s.in.Jobs[i].GPUs) == 0 {
			demand += s.in.Jobs[i].Workers
		}
	}
	for i := range s.in.Jobs {
		if len(s.in.Jobs[i].GPUs) == 0 {
			p.Decisions = append(p.Decisions, s.admit(i, demand > len(s.empty)))
			demand -= s.in.Jobs[i].Workers
		}
	}
}

// takeEmpty gives job i n free GPUs.
func (s *state) takeEmpty(i, n int) []int {
	gpus := make([]int, 0, n)
	for k := 0; k < n; k++ {
		g := s.empty[len(s.empty)-1]
		s.empty = s.empty[:len(s.empty)-1]
		gpus = append(gpus, g)
		s.hold(i, g)
	}
	return gpus
}

func (s *state) hold(i, g int) {
	if len(s.res[g]) > 0 {
		s.countFree(g, -1)
	}
	s.used[g] += s.in.Jobs[i].Shares
	if len(s.res[g]) == 0 && s.used[g] < s.in.GPUs[g].Shares {
		s.partial = append(s.partial, g)
	}
	s.res[g] = append(s.res[g], i)
	s.countFree(g, 1)
}

// admit decides one waiting job. Without contention (the free GPUs hold
// every waiting worker) it takes free GPUs. With contention (jobs wait) it
// first joins shared GPUs, those whose predicted gain clears the margin,
// then (only at its declared shares) those next to measured jobs, and
// takes free GPUs for the rest, keeping free GPUs for jobs that need them
// whole.
func (s *state) admit(i int, contended bool) Decision {
	j := &s.in.Jobs[i]
	d := Decision{Job: j.ID, Kind: Wait, Gain: math.NaN(), Basis: BasisDeclared}
	var picked []candidate
	if len(s.empty)+s.sharedWithFree(j.Shares) < j.Workers {
		d.Reason = fmt.Sprintf("wait: %d free GPU(s) and %d shared GPU(s) with %d free share(s) for %d worker(s)",
			len(s.empty), s.sharedWithFree(j.Shares), j.Shares, j.Workers)
		return d
	}
	if contended && !j.Never {
		picked = s.candidates(i, j.Workers)
	} else if !contended && len(s.empty) < j.Workers && !j.Never {
		picked = s.candidates(i, j.Workers-len(s.empty))
	}
	free := j.Workers - len(picked)
	if free > len(s.empty) {
		d.Reason = fmt.Sprintf("wait: %d free GPU(s) and %d shared GPU(s) it may join at %d share(s) for %d worker(s)",
			len(s.empty), len(picked), j.Shares, j.Workers)
		if j.Never {
			d.Reason = fmt.Sprintf("wait: caravan_pack = \"never\" and %d free GPU(s) for %d worker(s)", len(s.empty), j.Workers)
		}
		return d
	}
	d.Kind, d.GPUs = Admit, s.takeEmpty(i, free)
	if len(picked) == 0 {
		d.Reason = fmt.Sprintf("admit on %d free GPU(s) at %d share(s)", free, j.Shares)
		return d
	}
	var why []string
	explore := false
	for _, c := range picked {
		s.hold(i, c.gpu)
		d.GPUs = append(d.GPUs, c.gpu)
		d.Neighbours = append(d.Neighbours, c.nb...)
		where := fmt.Sprintf("GPU %s (%s) with %s", s.in.GPUs[c.gpu].ID, s.gpuMode(c.gpu), strings.Join(c.nb, ", "))
		if c.explore {
			explore = true
			why = append(why, where+": no measured packed rate for the pair, at declared shares")
			continue
		}
		d.Gain = min(nanInf(d.Gain), c.gain)
		why = append(why, fmt.Sprintf("%s: predicted combined gain %.2f >= 1+%.2f", where, c.gain, s.cfg.Margin))
	}
	if !explore {
		d.Basis = BasisOnline
	}
	d.Reason = fmt.Sprintf("admit %s at %d share(s), %d worker(s) packed, %d on free GPUs: %s", j.ID, j.Shares, len(picked), free, strings.Join(why, "; "))
	return d
}

func nanInf(x float64) float64 {
	if math.IsNaN(x) {
		return math.Inf(1)
	}
	return x
}

// candidates returns up to need shared GPUs job i may join, best first:
// those whose predicted gain clears the margin (highest gain first), then,
// when the job runs at its declared shares, those where a pair has no
// measured packed rate yet and every measured job keeps MinRatio.
func (s *state) candidates(i, need int) []candidate {
	j := &s.in.Jobs[i]
	var good, explore []candidate
	for k, seen := 0, 0; k < len(s.partial) && seen < s.cfg.MaxCandidates; {
		g := s.partial[k]
		if s.used[g] >= s.in.GPUs[g].Shares || len(s.res[g]) == 0 {
			last := len(s.partial) - 1 // full or emptied: pruned
			s.partial[k], s.partial = s.partial[last], s.partial[:last]
			continue
		}
		k++
		seen++
		if c, ok := s.judgeJoin(j, g); ok {
			if c.explore {
				explore = append(explore, c)
			} else {
				good = append(good, c)
			}
		}
		if len(good) >= need {
			break
		}
	}
	sort.SliceStable(good, func(a, b int) bool { return good[a].gain > good[b].gain })
	out := append(good, explore...)
	return out[:min(len(out), need)]
}

// judgeJoin says whether job j may join GPU g, and how.
func (s *state) judgeJoin(j *Job, g int) (candidate, bool) {
	if s.used[g]+j.Shares > s.in.GPUs[g].Shares {
		return candidate{}, false
	}
	c := candidate{gpu: g}
	gain, known := 0.0, true
	if r, ok := s.cfg.estimate(j); ok {
		gain += r
	} else {
		known = false
	}
	for _, k := range s.res[g] {
		o := &s.in.Jobs[k]
		if o.Never || o.PeakMemoryBytes < 0 || !s.cfg.soloKnown(o) || avoids(j, o) {
			return candidate{}, false // an opt-out, a refused profile, a job that could not be judged, or a pair that lost
		}
		c.nb = append(c.nb, o.ID)
		r, ok := s.cfg.estimate(o)
		if !ok {
			known = false
			continue
		}
		if r < s.cfg.MinRatio {
			return candidate{}, false
		}
		gain += r
	}
	if j.PeakMemoryBytes < 0 || (!s.cfg.soloKnown(j) && len(j.Avoid) > 0) {
		return candidate{}, false // a refused profile; a job unpacked before it was ever measured alone
	}
	if known {
		c.gain = gain
		return c, gain >= 1+s.cfg.Margin
	}
	c.gain, c.explore = math.NaN(), true
	return c, j.Shares == j.Declared
}

func avoids(a, b *Job) bool {
	for _, id := range a.Avoid {
		if id == b.ID {
			return true
		}
	}
	for _, id := range b.Avoid {
		if id == a.ID {
			return true
		}
	}
	return false
}
