package manager

import (
	"fmt"
	"time"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/queue"
	"github.com/caravan-nomad/caravan/planner/rightsize"
	"github.com/caravan-nomad/caravan/planner/service/failures"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/source"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

// Causes of a resize of a job's GPU shares per worker.
const (
	CauseRightsize = "rightsize"
	CauseGPUOOM    = "gpu-out-of-memory"
)

// Statuses of a resize in a job's view.
const (
	ResizeDecided = "decided" // an action this round carries it
	ResizeWaiting = "waiting" // a growth its queue or the cluster has no room for yet
	ResizeRefused = "refused" // a bound or the job's shape forbids it
	ResizePending = "pending" // written; waiting to see the new size in Nomad
)

// Resize is a change of a job's GPU shares per worker the planner decided
// (or refused) this round: right-sizing applied, or a regrowth after the
// job ran out of GPU memory (planner/POLICY.md, "Right-sizing").
type Resize struct {
	Cause  string `json:"cause"`
	From   int    `json:"from_shares"`
	To     int    `json:"to_shares"`
	Status string `json:"status"`
	Reason string `json:"reason"`

	device   string    // the worker task's device request, by its jobspec name
	oomAt    time.Time // the out-of-memory report a regrowth answers
	oomAlloc string    // and its allocation
	// key identifies a refusal or wait, so that its event is written once.
	key string
	// meta are the measured numbers the scaling event carries.
	meta map[string]any
}

// sizing decides this round's change of shares per worker for a running
// job: a regrowth when its worker reported running out of GPU memory at
// the shares it holds (rep's out-of-memory failures then count as user
// errors if it cannot grow), else the right-sizing recommendation when the
// job or its queue opts in to apply it. Nil: no change, or one is pending.
func (b *roundBuilder) sizing(j *source.Job, mm *memory, v *JobView, running int, recs []ingest.Record, rep *failures.Report) *Resize {
	sz, now, s := &mm.size, b.now, b.s
	shares := workerShares(j, s)
	if sz.pending != 0 {
		if shares == sz.pending || now.Sub(sz.pendingAt) > max(s.Cooldown, 2*s.Interval) {
			sz.pending = 0
		} else {
			v.Resize = &Resize{Cause: sz.pendingCause, From: shares, To: sz.pending, Status: ResizePending,
				Reason: "written to Nomad; waiting to see the new size"}
			return nil
		}
	}
	bounds := rightsize.Bounds{SharesPerGPU: b.gpus.perGPU, Min: j.Spec.MinGPUShares, Max: j.Spec.MaxGPUShares}
	if oom, ok := newestOOM(recs, rep, sz.since, sz.oomSeen, sz.oomAnswered); ok && shares > 0 && v.Workers > 0 {
		sz.oomShares = max(sz.oomShares, shares)
		g := rightsize.Regrow(shares, oom.GPUMemoryPeakBytes, b.gpus.memoryPerShareMiB<<20, bounds)
		rz := &Resize{Cause: CauseGPUOOM, From: shares, To: g.To, Reason: g.Reason,
			meta: map[string]any{metaSharesFrom: shares, metaSharesTo: g.To}}
		if g.PeakBytes > 0 {
			rz.meta[metaPeakMiB] = g.PeakBytes >> 20
		}
		if g.To == shares {
			rep.GPUOutOfMemoryAsUser()
			return b.refuse(v, rz, "bound")
		}
		rz.oomAt, rz.oomAlloc = oom.Time, oom.AllocationID
		return b.resizable(j, v, rz)
	}
	rec := v.Rightsize
	if b.mode(j) != source.RightsizeApply || rec == nil || !rec.Enough || running == 0 || running < v.Workers {
		return nil
	}
	rz := &Resize{Cause: CauseRightsize, From: shares, To: rec.Shares, Reason: rec.Reason, meta: evidenceMeta(rec)}
	if rec.Shares == shares {
		if want := rec.Evidence.Want(); want != shares {
			rz.To = want
			return b.refuse(v, rz, "bound")
		}
		return nil
	}
	return b.resizable(j, v, rz)
}

// resizable finds the device request a resize changes, refusing a worker
// group whose shares are not one task's device count.
func (b *roundBuilder) resizable(j *source.Job, v *JobView, rz *Resize) *Resize {
	dev, why := workerDevice(j, b.s)
	if why != "" {
		rz.Reason = why
		return b.refuse(v, rz, "shape")
	}
	rz.device, rz.Status = dev, ResizeDecided
	v.Resize = rz
	return rz
}

// refuse shows a resize that will not be made and queues its event (once
// per kind of refusal and size).
func (b *roundBuilder) refuse(v *JobView, rz *Resize, kind string) *Resize {
	if rz.Status == "" {
		rz.Status = ResizeRefused
	}
	rz.key = fmt.Sprintf("%s/%s/%d->%d", rz.Cause, kind, rz.From, rz.To)
	v.Resize = rz
	b.notes = append(b.notes, sizeNote{key: source.JobKey{Namespace: v.Namespace, ID: v.ID}, group: v.Group, rz: *rz})
	return nil
}

// mode is the job's right-sizing mode: its meta, else its queue's setting.
func (b *roundBuilder) mode(j *source.Job) string {
	if j.Spec.RightsizeSet || len(b.s.QueueRightsize) == 0 {
		return j.Spec.Rightsize
	}
	name, _ := b.s.Queues.Assign(j.Key.Namespace, j.Job.Meta[queue.MetaKey])
	if m := b.s.QueueRightsize[name]; m != "" {
		return m
	}
	return j.Spec.Rightsize
}

// newestOOM is the newest sign after seen (and not before since), from an
// allocation not yet answered, that a worker ran out of GPU memory: a
// report that says so (with its peak), else the caravan driver's event on
// a worker's exit, which rep counts as a GPUOutOfMemory failure (it carries
// no peak, so the regrowth doubles).
func newestOOM(recs []ingest.Record, rep *failures.Report, since, seen time.Time, answered map[string]bool) (ingest.Record, bool) {
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if r.Time.Before(since) || !r.Time.After(seen) {
			break
		}
		if r.GPUOutOfMemory && !answered[r.AllocationID] {
			return r, true
		}
	}
	var out ingest.Record
	found := false
	for _, f := range rep.Failures {
		t := time.Unix(0, f.Time)
		if f.Class != failures.GPUOutOfMemory || answered[f.AllocationID] || t.Before(since) || !t.After(seen) {
			continue
		}
		if !found || t.After(out.Time) {
			out, found = ingest.Record{Time: t, AllocationID: f.AllocationID}, true
			out.GPUOutOfMemory = true
		}
	}
	return out, found
}

// oomReports are the times (Unix nanoseconds) of out-of-memory reports, by
// allocation (failures.Report.MarkGPUOutOfMemory).
func oomReports(recs []ingest.Record) map[string][]int64 {
	var out map[string][]int64
	for _, r := range recs {
		if r.GPUOutOfMemory && r.AllocationID != "" {
			if out == nil {
				out = map[string][]int64{}
			}
			out[r.AllocationID] = append(out[r.AllocationID], r.Time.UnixNano())
		}
	}
	return out
}

// workerDevice is the name, as the jobspec writes it, of the one GPU device
// request of the worker group's tasks; why says why there is none.
func workerDevice(j *source.Job, s Settings) (name, why string) {
	reqs := workerGPURequests(j, s)
	n := len(reqs)
	if n == 1 {
		name = reqs[0].Name
	}
	switch {
	case n == 0:
		return "", fmt.Sprintf("the worker group's tasks request no %s device (their shares come from %s, which a resize does not rewrite)",
			s.Device, source.MetaGPUShares)
	case n > 1:
		return "", fmt.Sprintf("%d device requests for %s in the worker group: a resize changes one task's", n, s.Device)
	}
	return name, ""
}

// Meta keys of a resize's scaling event.
const (
	metaSharesFrom = "caravan_gpu_shares_from"
	metaSharesTo   = "caravan_gpu_shares"
	metaPeakMiB    = "caravan_gpu_memory_peak_mib"
	metaReports    = "caravan_reports"
	metaPerWorker  = "caravan_samples_per_sec_per_worker"
	metaCause      = "caravan_resize_cause"
)

// evidenceMeta are a recommendation's measured numbers, for the event.
func evidenceMeta(rec *rightsize.Recommendation) map[string]any {
	ev := rec.Evidence
	m := map[string]any{metaSharesFrom: rec.CurrentShares, metaSharesTo: rec.Shares,
		metaPeakMiB: ev.PeakMiB(), metaReports: ev.Reports}
	if r, ok := ev.PerWorker[rec.CurrentShares]; ok {
		m[metaPerWorker] = fmt.Sprintf("%.4g", r)
	}
	return m
}

// gpuMilli is the policy's milli-GPUs of a worker holding shares.
func (b *roundBuilder) gpuMilli(shares int) int {
	per := max(b.gpus.perGPU, 1)
	if shares >= per {
		return (shares / per) * policy.MilliGPU
	}
	return shares * policy.MilliGPU / per
}

// fitGrowth holds back each growth of shares that its team queue or the
// cluster has no room for (it waits, with an event that says why), and
// sizes the policy's view of every resized job at its new shares, so that
// the policy counts its workers at that size: one round decides both.
func (b *roundBuilder) fitGrowth() {
	capacity, held := 0, 0
	for _, n := range b.r.Capacity.Nodes {
		capacity += n.GPUs * policy.MilliGPU
	}
	byQueue := map[string]int{}
	for _, c := range b.cands {
		_, _, h := queue.Demand(&c.pj)
		held += h
		if b.s.Queues.Enabled() {
			name, _ := b.s.Queues.Assign(c.job.Key.Namespace, c.job.Job.Meta[queue.MetaKey])
			byQueue[name] += h
		}
	}
	for i := range b.cands {
		c := &b.cands[i]
		rz := c.resize
		if rz == nil {
			continue
		}
		workers := max(c.pj.Current.Workers, 1)
		delta := workers * (b.gpuMilli(rz.To) - c.pj.Worker.GPUMilli)
		if delta > 0 {
			why := b.growthRoom(c, delta, capacity-held, byQueue)
			if why != "" {
				rz.Status, rz.Reason = ResizeWaiting, rz.Reason+"; waits: "+why
				b.refuse(c.view, rz, "room")
				c.resize = nil
				continue
			}
			held += delta
		}
		c.pj.Worker.GPUMilli = b.gpuMilli(rz.To)
	}
}

// growthRoom says why a growth of delta milli-GPUs does not fit now: the
// cluster's free GPUs, the job's queue guarantee (a job that may not be
// suspended never borrows) or its queue's borrowing limit. "" if it fits.
func (b *roundBuilder) growthRoom(c *cand, delta, free int, byQueue map[string]int) string {
	if delta > free {
		return fmt.Sprintf("the cluster has %.3g GPUs free, the growth needs %.3g", inGPUs(max(free, 0)), inGPUs(delta))
	}
	if !b.s.Queues.Enabled() {
		return ""
	}
	name, _ := b.s.Queues.Assign(c.job.Key.Namespace, c.job.Job.Meta[queue.MetaKey])
	q := queue.Queue{Name: name, BorrowLimit: queue.Unlimited}
	for _, cq := range b.s.Queues.Queues {
		if cq.Name == name {
			q = cq
		}
	}
	after := byQueue[name] + delta
	if after <= q.Guarantee {
		byQueue[name] = after
		return ""
	}
	if !c.job.Spec.Suspendable {
		return fmt.Sprintf("queue %s would hold %.3g GPUs, beyond its %.3g guaranteed, and the job may not be suspended, so it may not borrow",
			name, inGPUs(after), inGPUs(q.Guarantee))
	}
	if q.BorrowLimit != queue.Unlimited && after-q.Guarantee > q.BorrowLimit {
		return fmt.Sprintf("queue %s would borrow %.3g GPUs, beyond its borrowing limit of %.3g",
			name, inGPUs(after-q.Guarantee), inGPUs(q.BorrowLimit))
	}
	byQueue[name] = after
	return ""
}

// sizeNote is a refused or waiting resize whose event apply writes.
type sizeNote struct {
	key   source.JobKey
	group string
	rz    Resize
}

// resizeMessage is the text of a resize's scaling event.
func resizeMessage(a Action) string {
	rz := a.Resize
	what := "right-sizing"
	if rz.Cause == CauseGPUOOM {
		what = "regrowth after running out of GPU memory"
	}
	msg := fmt.Sprintf("caravan planner: GPU shares per worker %d -> %d (%s; the job resumes from the checkpoint the driver takes on stop): %s",
		rz.From, rz.To, what, rz.Reason)
	if a.From != a.To {
		msg += fmt.Sprintf("; workers %d -> %d at the new size", a.From, a.To)
	}
	return msg
}

// noteMessage is the text of a refused or waiting resize's event.
func noteMessage(rz Resize) string {
	what := "right-sizing to"
	if rz.Cause == CauseGPUOOM {
		what = "regrowth after running out of GPU memory to"
	}
	verb := "refused"
	if rz.Status == ResizeWaiting {
		verb = "waiting"
	}
	return fmt.Sprintf("caravan planner: %s: %s %d GPU share(s) per worker (now %d): %s", verb, what, rz.To, rz.From, rz.Reason)
}

// resizeEvent is the count-less scaling event that records an applied
// resize (a registration records none), with its measured numbers and the
// worker count the registration set (submit.EventMetaCount).
func resizeEvent(a *Action, c submit.Change) submit.Scale {
	ev := c.Event(a.Group, false)
	meta := map[string]any{}
	for k, v := range c.Meta {
		meta[k] = v
	}
	for k, v := range a.Resize.meta {
		meta[k] = v
	}
	meta[submit.EventMetaAction] = submit.ActionResize
	meta[metaCause] = a.Resize.Cause
	meta[submit.EventMetaCount] = a.To
	ev.Meta = meta
	return ev
}
