package policy

import (
	"fmt"
	"math"
	"sort"
)

// size is a policy's sizing decision for one job before placement.
type size struct {
	w, ps  int
	gain   float64
	reason string
	// last is the last greedy step granted; its reason is formatted once
	// at the end of the round (formatting per grant dominated big rounds).
	last     *step
	describe func(s *size) string
	// unmeasured: the job had no speed model, so the gain assumed linear
	// scaling and is in relative units.
	unmeasured bool
}

// sameShape reports whether the current allocation already has w workers
// and ps parameter servers.
func sameShape(j *Job, w, ps int) bool {
	return j.Current.Workers == w && j.Current.PS == ps && w > 0
}

// finish places the sized jobs and builds the plan. order is the policy's
// priority order (indices into in.Jobs): earlier jobs are placed first among
// equals and keep their size when the cluster is fragmented.
func finish(name string, in Input, sizes []size, order []int) Plan {
	return finishWith(name, in, sizes, order, placeOpts{})
}

// finishOpts is finish; with packAware, a job that fragmentation would
// spread over more nodes than its size needs is instead given the size
// (down to its minimum) whose actual placement predicts the best rate:
// three GPUs on one node often beat four spread over two.
func finishOpts(name string, in Input, sizes []size, order []int, packAware bool) Plan {
	return finishWith(name, in, sizes, order, placeOpts{packAware: packAware})
}

// placeOpts selects the placement rule for jobs whose shape changed.
type placeOpts struct {
	packAware bool
	// mostFree is the Pollux artifact's Optimus placement: smallest jobs
	// first, each worker on the node with the most free GPUs.
	mostFree bool
}

func finishWith(name string, in Input, sizes []size, order []int, opts placeOpts) Plan {
	for i := range sizes {
		if s := &sizes[i]; s.describe != nil && (s.last != nil || s.w == 0) {
			s.reason = s.describe(s)
		}
	}
	pl := newPlacer(in.Cluster)
	allocs := make([]Allocation, len(in.Jobs))
	placed := make([]bool, len(in.Jobs))
	// Pass 1: jobs whose shape is unchanged keep their placement.
	for _, i := range order {
		j := &in.Jobs[i]
		if !sameShape(j, sizes[i].w, sizes[i].ps) {
			continue
		}
		if kept, ok := pl.reserve(j, j.Current); ok {
			allocs[i] = Allocation{Workers: j.Current.Workers, PS: j.Current.PS, Placement: kept}
			placed[i] = true
		}
	}
	// Pass 2: the rest, largest GPU demand first (packing), priority order
	// among equals.
	for _, i := range resizedOrder(in, sizes, order, placed, opts) {
		if a, ok := pl.placeResized(&in.Jobs[i], &sizes[i], opts); ok {
			allocs[i] = a
		}
	}
	return buildPlan(name, in, sizes, allocs)
}

// resizedOrder lists the jobs left to place after pass 1, largest GPU
// demand first (smallest first under opts.mostFree), priority order among
// equals.
func resizedOrder(in Input, sizes []size, order []int, placed []bool, opts placeOpts) []int {
	rank := make([]int, len(in.Jobs))
	for r, i := range order {
		rank[i] = r
	}
	rest := make([]int, 0, len(order))
	for _, i := range order {
		if !placed[i] && sizes[i].w > 0 {
			rest = append(rest, i)
		}
	}
	sort.SliceStable(rest, func(a, b int) bool {
		ja, jb := &in.Jobs[rest[a]], &in.Jobs[rest[b]]
		da := int64(sizes[rest[a]].w) * int64(max(ja.Worker.GPUMilli, 1))
		db := int64(sizes[rest[b]].w) * int64(max(jb.Worker.GPUMilli, 1))
		if da != db {
			return (da > db) != opts.mostFree
		}
		return rank[rest[a]] < rank[rest[b]]
	})
	return rest
}

// placeResized places job j at size s, shrinking s when fragmentation
// leaves less room. It reports false, with s zeroed and its reason set,
// when the job cannot get its minimum.
func (pl *placer) placeResized(j *Job, s *size, opts placeOpts) (Allocation, bool) {
	var out map[int]*NodeAlloc
	if opts.mostFree && j.Worker.GPUMilli >= MilliGPU {
		out = pl.placeMostFree(j, s.w)
	} else {
		out = pl.placeWorkers(j, s.w)
	}
	if opts.packAware && j.Speed != nil && len(out) > nodesFor(s.w, j.Worker, pl.maxGPUs) {
		out = pl.repack(j, s, out)
	}
	got := 0
	for _, na := range out {
		got += na.Workers
	}
	if got < s.w {
		if got < j.minWorkers() {
			pl.release(j, out)
			s.reason = fmt.Sprintf("not placed: no room for %d workers (cluster fragmented)", j.minWorkers())
			s.w, s.ps, s.gain = 0, 0, 0
			return Allocation{}, false
		}
		s.reason += fmt.Sprintf("; shrunk to %d workers by fragmentation", got)
		s.w = got
	}
	if ps := pl.placePS(j, s.ps, out); ps < s.ps {
		if ps < j.MinPS {
			pl.release(j, out)
			s.reason = fmt.Sprintf("not placed: no room for %d parameter servers", j.MinPS)
			s.w, s.ps, s.gain = 0, 0, 0
			return Allocation{}, false
		}
		s.ps = ps
	}
	return Allocation{Workers: s.w, PS: s.ps, Placement: toPlacement(out)}, true
}

// buildPlan turns the allocations into the plan, with each job's
// predicted remaining time.
func buildPlan(name string, in Input, sizes []size, allocs []Allocation) Plan {
	plan := Plan{Policy: name, Now: in.Now, Jobs: make([]JobPlan, len(in.Jobs))}
	plan.CapacityGPUMilli = int(clusterTotals(in.Cluster).gpu)
	gpn := maxGPUsPerNode(in.Cluster)
	for i := range in.Jobs {
		j := &in.Jobs[i]
		a := allocs[i]
		jp := JobPlan{ID: j.ID, Allocation: a, Gain: sizes[i].gain, Reason: sizes[i].reason}
		if a.Workers == 0 {
			jp.Gain = 0
		}
		jp.Changed = !sameAllocation(j.Current, a)
		plan.UsedGPUMilli += a.Workers * j.Worker.GPUMilli
		if j.Speed != nil {
			n := a.Nodes()
			if n == 0 {
				n = nodesFor(a.Workers, j.Worker, gpn)
			}
			if r := j.rate(a.Workers, a.PS, n); r > 0 {
				jp.PredictedRemaining = j.Remaining / r
			} else {
				jp.PredictedRemaining = math.Inf(1)
			}
		}
		plan.Jobs[i] = jp
	}
	return plan
}

// sameAllocation compares shapes and per-node counts (not GPU indices). When
// a (the current allocation) lists no parameter-server locations, only the
// workers' nodes are compared.
func sameAllocation(a, b Allocation) bool {
	if a.Workers != b.Workers || a.PS != b.PS {
		return false
	}
	if a.Workers == 0 && a.PS == 0 {
		return true
	}
	listedPS := 0
	for _, p := range a.Placement {
		listedPS += p.PS
	}
	withPS := listedPS > 0 || a.PS == 0
	count := func(p NodeAlloc) [2]int {
		if withPS {
			return [2]int{p.Workers, p.PS}
		}
		return [2]int{p.Workers, 0}
	}
	ca := map[string][2]int{}
	for _, p := range a.Placement {
		if c := count(p); c != [2]int{} {
			ca[p.Node] = c
		}
	}
	n := 0
	for _, p := range b.Placement {
		c := count(p)
		if c == [2]int{} {
			continue
		}
		n++
		if ca[p.Node] != c {
			return false
		}
	}
	return n == len(ca)
}

// admit gives every job, in order, its minimum (workers and PS) while the
// aggregate capacity allows; jobs that do not fit get nothing. It returns
// the remaining free capacity.
func admit(in Input, order []int, sizes []size) totals {
	free := clusterTotals(in.Cluster)
	for _, i := range order {
		j := &in.Jobs[i]
		w, ps := j.minWorkers(), j.MinPS
		if free.fits(j.Worker, w) && free.fits(j.PSDem, ps) {
			free.sub(j.Worker, w)
			free.sub(j.PSDem, ps)
			sizes[i].w, sizes[i].ps = w, ps
			sizes[i].reason = fmt.Sprintf("admitted with minimum %d workers", w)
		} else {
			sizes[i].reason = fmt.Sprintf("queued: cluster cannot fit minimum %d workers", w)
		}
	}
	return free
}

// fifoOrder sorts by priority (higher first), then submission, then ID.
func fifoOrder(jobs []Job) []int {
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ja, jb := &jobs[order[a]], &jobs[order[b]]
		if ja.Priority != jb.Priority {
			return ja.Priority > jb.Priority
		}
		if !ja.Submitted.Equal(jb.Submitted) {
			return ja.Submitted.Before(jb.Submitted)
		}
		return ja.ID < jb.ID
	})
	return order
}
