package packing

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// state is the GPUs' occupancy during a round.
type state struct {
	cfg     Config
	in      *Input
	used    []int   // shares in use per GPU
	res     [][]int // resident job indices per GPU
	empty   []int   // GPUs with no resident, as a stack (lowest index on top)
	partial []int   // GPUs with residents and free shares (lazily pruned)
	byFree  []int   // GPUs with residents by free shares (index: free shares)
}

// Decide decides one round: first it judges every packed GPU by its jobs'
// measured rates (unpacking a pair that loses), then it admits waiting
// jobs, onto free GPUs first and onto shared GPUs by predicted gain or,
// for a job without a measured packed rate, at its declared shares. It
// returns an error, naming the field, for invalid input.
func Decide(cfg Config, in Input) (Plan, error) {
	if err := validate(cfg, &in); err != nil {
		return Plan{}, err
	}
	s := newState(cfg, &in)
	var p Plan
	victims := s.unpack(&p)
	s.place(&p, victims)
	return p, nil
}

func validate(cfg Config, in *Input) error {
	switch {
	case cfg.Margin < 0 || math.IsNaN(cfg.Margin):
		return fmt.Errorf("config: margin %v: want >= 0", cfg.Margin)
	case cfg.MinRatio < 0 || cfg.MinRatio > 1 || math.IsNaN(cfg.MinRatio):
		return fmt.Errorf("config: min_ratio %v: want 0..1", cfg.MinRatio)
	case !(cfg.MaxRatio >= 1), !(cfg.MaxRate > 0), math.IsNaN(cfg.UnpackBelow):
		return fmt.Errorf("config: max_ratio %v must be >= 1, max_rate %v > 0, unpack_below a number", cfg.MaxRatio, cfg.MaxRate)
	}
	for i, g := range in.GPUs {
		if g.Shares < 1 {
			return fmt.Errorf("gpus[%d] (%s): shares %d: want >= 1", i, g.ID, g.Shares)
		}
	}
	for i := range in.Jobs {
		j := &in.Jobs[i]
		switch {
		case j.Workers < 1:
			return fmt.Errorf("jobs[%d] (%s): workers %d: want >= 1", i, j.ID, j.Workers)
		case j.Shares < 1 || j.Declared < 1:
			return fmt.Errorf("jobs[%d] (%s): shares %d, declared %d: want >= 1", i, j.ID, j.Shares, j.Declared)
		case len(j.GPUs) != 0 && len(j.GPUs) != j.Workers:
			return fmt.Errorf("jobs[%d] (%s): gpus: %d for %d workers", i, j.ID, len(j.GPUs), j.Workers)
		}
		for _, g := range j.GPUs {
			if g < 0 || g >= len(in.GPUs) {
				return fmt.Errorf("jobs[%d] (%s): gpus: index %d out of range", i, j.ID, g)
			}
		}
	}
	return nil
}

func newState(cfg Config, in *Input) *state {
	if cfg.MaxCandidates <= 0 {
		cfg.MaxCandidates = DefaultConfig().MaxCandidates
	}
	s := &state{cfg: cfg, in: in, used: make([]int, len(in.GPUs)), res: make([][]int, len(in.GPUs))}
	for i := range in.Jobs {
		for _, g := range in.Jobs[i].GPUs {
			s.used[g] += in.Jobs[i].Shares
			s.res[g] = append(s.res[g], i)
		}
	}
	s.rebuildFree()
	return s
}

func (s *state) rebuildFree() {
	s.empty, s.partial = s.empty[:0], s.partial[:0]
	clear(s.byFree)
	for g := len(s.in.GPUs) - 1; g >= 0; g-- {
		switch {
		case len(s.res[g]) == 0:
			s.empty = append(s.empty, g)
		case s.used[g] < s.in.GPUs[g].Shares:
			s.partial = append(s.partial, g)
			s.countFree(g, 1)
		}
	}
	// partial in ascending order: the lowest GPUs are examined first
	for a, b := 0, len(s.partial)-1; a < b; a, b = a+1, b-1 {
		s.partial[a], s.partial[b] = s.partial[b], s.partial[a]
	}
}

// countFree adds n to the count of shared GPUs with g's free shares.
func (s *state) countFree(g, n int) {
	f := s.in.GPUs[g].Shares - s.used[g]
	if f <= 0 {
		return
	}
	for len(s.byFree) <= f {
		s.byFree = append(s.byFree, 0)
	}
	s.byFree[f] += n
}

// sharedWithFree is how many shared GPUs have at least n free shares.
func (s *state) sharedWithFree(n int) int {
	c := 0
	for f := max(n, 1); f < len(s.byFree); f++ {
		c += s.byFree[f]
	}
	return c
}

func (s *state) gpuMode(g int) string {
	if s.in.GPUs[g].MPS {
		return "MPS"
	}
	return "time-sliced"
}

// unpack judges every GPU that two or more jobs share and returns the jobs
// to move, in the order they were chosen. Their shares are freed.
func (s *state) unpack(p *Plan) []int {
	var victims []int
	gone := map[int]bool{}
	for g := range s.in.GPUs {
		if len(s.res[g]) < 2 || anyIn(s.res[g], gone) {
			continue
		}
		d, victim := s.judge(g)
		if victim < 0 {
			p.Decisions = append(p.Decisions, d)
			continue
		}
		gone[victim] = true
		victims = append(victims, victim)
		p.Decisions = append(p.Decisions, d)
		s.remove(victim)
	}
	if len(victims) > 0 {
		s.rebuildFree()
	}
	return victims
}

// judge decides one packed GPU: a Keep decision, or the unpack decision
// and the job to move (the latest placed that is not caravan_pack =
// "never", if any), or -1.
func (s *state) judge(g int) (Decision, int) {
	res := append([]int(nil), s.res[g]...)
	// The latest placed moves; a caravan_pack = "never" job is moved last
	// (a GPU it shares with a losing pair is freed by its neighbour moving).
	sort.SliceStable(res, func(a, b int) bool {
		ja, jb := &s.in.Jobs[res[a]], &s.in.Jobs[res[b]]
		if ja.Never != jb.Never {
			return !ja.Never
		}
		return ja.Placed > jb.Placed
	})
	var parts, unknown, below []string
	gain, all := 0.0, true
	for _, i := range res {
		j := &s.in.Jobs[i]
		r, ok := s.cfg.ratio(j)
		if !ok {
			all = false
			unknown = append(unknown, j.ID)
			continue
		}
		gain += r
		parts = append(parts, fmt.Sprintf("%s %.2f (%.4g of %.4g/s solo)", j.ID, r, j.Packed, j.Solo))
		if r < s.cfg.MinRatio {
			below = append(below, j.ID)
		}
	}
	victim := res[0]
	v := &s.in.Jobs[victim]
	d := Decision{Job: v.ID, Gain: math.NaN(), Basis: BasisOnline, Neighbours: s.others(g, victim)}
	where := fmt.Sprintf("GPU %s (%s)", s.in.GPUs[g].ID, s.gpuMode(g))
	switch {
	case all && gain < s.cfg.UnpackBelow:
		d.Gain = gain
		d.Reason = fmt.Sprintf("unpack %s from %s: measured combined gain %.2f < %.2f (%s)", v.ID, where, gain, s.cfg.UnpackBelow, strings.Join(parts, ", "))
	case len(below) > 0:
		if all {
			d.Gain = gain
		}
		d.Reason = fmt.Sprintf("unpack %s from %s: %s below %.2f of solo rate (%s)", v.ID, where, strings.Join(below, ", "), s.cfg.MinRatio, strings.Join(parts, ", "))
	default:
		d.Kind, d.Job, d.Neighbours = Keep, s.in.GPUs[g].ID, nil
		if !all {
			d.Basis = BasisDeclared
			d.Reason = fmt.Sprintf("keep %s packed: %s not measured packed and alone yet, not unpacked on a guess", where, strings.Join(unknown, ", "))
			if len(parts) > 0 {
				d.Reason += " (" + strings.Join(parts, ", ") + ")"
			}
			return d, -1
		}
		d.Gain = gain
		d.Reason = fmt.Sprintf("keep %s packed: measured combined gain %.2f >= %.2f (%s)", where, gain, s.cfg.UnpackBelow, strings.Join(parts, ", "))
		return d, -1
	}
	return d, victim
}

func (s *state) others(g, not int) []string {
	var out []string
	for _, i := range s.res[g] {
		if i != not {
			out = append(out, s.in.Jobs[i].ID)
		}
	}
	return out
}

func (s *state) remove(i int) {
	j := &s.in.Jobs[i]
	for _, g := range j.GPUs {
		s.used[g] -= j.Shares
		s.res[g] = dropInt(s.res[g], i)
	}
}

func dropInt(xs []int, x int) []int {
	for k, v := range xs {
		if v == x {
			return append(xs[:k:k], xs[k+1:]...)
		}
	}
	return xs
}

func anyIn(xs []int, m map[int]bool) bool {
	for _, x := range xs {
		if m[x] {
			return true
		}
	}
	return false
}
