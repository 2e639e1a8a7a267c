package policy

import (
	"container/heap"
	"fmt"
	"math"
)

// step is one candidate grant: dw more workers and dps more parameter
// servers for a job, worth gain (seconds of predicted remaining time saved
// per unit of dominant share).
type step struct {
	job      int
	dw, dps  int
	gain     float64
	prio     int // job priority; higher always first
	rank     int // admission rank; lower wins ties (determinism)
	what     string
	valid    bool
	heapSlot int
}

type stepHeap []*step

func (h stepHeap) Len() int { return len(h) }
func (h stepHeap) Less(a, b int) bool {
	if h[a].prio != h[b].prio {
		return h[a].prio > h[b].prio
	}
	if h[a].gain != h[b].gain {
		return h[a].gain > h[b].gain
	}
	return h[a].rank < h[b].rank
}
func (h stepHeap) Swap(a, b int) {
	h[a], h[b] = h[b], h[a]
	h[a].heapSlot = a
	h[b].heapSlot = b
}
func (h *stepHeap) Push(x any) { s := x.(*step); s.heapSlot = len(*h); *h = append(*h, s) }
func (h *stepHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}

// timeFn predicts a job's remaining time (seconds) with w workers and ps
// parameter servers; +Inf when it cannot run.
type timeFn func(j *Job, i, w, ps int) float64

// greedyCtx holds what a marginal-gain round needs.
type greedyCtx struct {
	in    Input
	cap   totals
	free  totals
	gpn   int
	sizes []size
	// remaining predicts remaining time for a shape.
	remaining timeFn
	// lookahead > 1 lets a step grant several workers at once, so a job whose
	// gain only pays off after a restart-sized jump is still considered.
	lookahead int
}

// best returns the best next step for job i from its current size, or an
// invalid step when no grant fits or gains.
func (g *greedyCtx) best(i, rank int) *step {
	j := &g.in.Jobs[i]
	s := g.sizes[i]
	if s.w == 0 {
		return &step{job: i, rank: rank}
	}
	cur := g.remaining(j, i, s.w, s.ps)
	out := &step{job: i, rank: rank, prio: j.Priority}
	wshare := g.cap.share(j.Worker)
	for d := 1; d <= g.lookahead && s.w+d <= j.maxWorkers(); d++ {
		if !g.free.fits(j.Worker, d) {
			break
		}
		t := g.remaining(j, i, s.w+d, s.ps)
		gain := (cur - t) / (float64(d) * wshare)
		if math.IsInf(cur, 1) && !math.IsInf(t, 1) {
			gain = math.MaxFloat64 / 4
		}
		if gain > 0 && (!out.valid || gain > out.gain) {
			*out = step{job: i, dw: d, gain: gain, rank: rank, prio: j.Priority, what: "worker", valid: true}
		}
	}
	if s.ps < j.MaxPS && g.free.fits(j.PSDem, 1) {
		t := g.remaining(j, i, s.w, s.ps+1)
		gain := (cur - t) / g.cap.psShare(j)
		if gain > 0 && (!out.valid || gain > out.gain) {
			*out = step{job: i, dps: 1, gain: gain, rank: rank, prio: j.Priority, what: "parameter server", valid: true}
		}
	}
	return out
}

// run grants units by marginal gain until capacity runs out or no gain is
// positive.
func (g *greedyCtx) run(order []int) {
	h := make(stepHeap, 0, len(order))
	for r, i := range order {
		if st := g.best(i, r); st.valid {
			heap.Push(&h, st)
		}
	}
	grantByGain(&h, g.in.Jobs, &g.free, g.sizes, g.best, describeOptimus)
}

// grantByGain is the marginal-gain loop both greedy policies share: pop the
// best step; if it no longer fits (capacity shrank), re-evaluate that job and
// re-push it; else grant it, let describe name the job's new size, and
// re-evaluate only that job.
func grantByGain(h *stepHeap, jobs []Job, free *totals, sizes []size, best func(job, rank int) *step, describe func(*size) string) {
	for h.Len() > 0 {
		st := heap.Pop(h).(*step)
		j := &jobs[st.job]
		if !free.fits(j.Worker, st.dw) || !free.fits(j.PSDem, st.dps) {
			if nst := best(st.job, st.rank); nst.valid {
				heap.Push(h, nst)
			}
			continue
		}
		free.sub(j.Worker, st.dw)
		free.sub(j.PSDem, st.dps)
		s := &sizes[st.job]
		s.w += st.dw
		s.ps += st.dps
		s.gain = st.gain
		s.last = st
		s.describe = describe
		s.unmeasured = j.Speed == nil
		if nst := best(st.job, st.rank); nst.valid {
			heap.Push(h, nst)
		}
	}
}

// optimusTime is Optimus's remaining time: remaining work over predicted
// rate with the fewest nodes that hold the workers.
func (g *greedyCtx) optimusTime(j *Job, _ int, w, ps int) float64 {
	r := j.rate(w, ps, nodesFor(w, j.Worker, g.gpn))
	if r <= 0 {
		return math.Inf(1)
	}
	return j.remaining() / r
}

func describeOptimus(s *size) string {
	if s.unmeasured {
		return fmt.Sprintf("marginal gain: +%d %s, assuming linear scaling (speed not measured yet); %d workers, %d ps",
			max(s.last.dw, s.last.dps), s.last.what, s.w, s.ps)
	}
	return fmt.Sprintf("marginal gain: +%d %s saves %.3g s per dominant share; %d workers, %d ps",
		max(s.last.dw, s.last.dps), s.last.what, s.last.gain, s.w, s.ps)
}
