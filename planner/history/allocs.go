package history

import (
	"sort"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// Settle is the window in which allocation changes count as one restart,
// from the first change of a group: a scale starts or stops its
// allocations within seconds of each other. Groups do not chain, so a job
// reshaped every few tens of seconds counts every reshape. (A replaced
// allocation whose successor starts later than this is still one restart:
// the stop alone leaves the job holding nothing, which counts none.)
const Settle = 10 * time.Second

// Span is one allocation's stretch of holding resources.
type Span struct {
	Start, End time.Time // End zero: still running
	GPUMilli   int
}

// Allocs is what a job's allocation history says.
type Allocs struct {
	Spans []Span
	// TaskRestarts are in-place task restarts (Nomad's restart stanza).
	TaskRestarts int
	// First is the earliest allocation's creation (zero without any).
	First time.Time
}

// FromAllocs reads the spans of group's allocations: from the first time a
// task started to the last time one finished (now, while running), each
// holding gpuMilli. Allocations that never started hold nothing. Nomad's
// garbage collection forgets old allocations, and with them their history.
func FromAllocs(allocs []*nomadapi.AllocationListStub, group string, gpuMilli int) Allocs {
	var out Allocs
	for _, a := range allocs {
		if a == nil || a.TaskGroup != group {
			continue
		}
		if c := time.Unix(0, a.CreateTime); a.CreateTime > 0 && (out.First.IsZero() || c.Before(out.First)) {
			out.First = c
		}
		start, end, restarts, running := taskTimes(a)
		out.TaskRestarts += restarts
		if start.IsZero() {
			continue
		}
		if running || a.ClientStatus == "running" {
			end = time.Time{}
		} else if end.IsZero() {
			end = time.Unix(0, a.ModifyTime)
		}
		out.Spans = append(out.Spans, Span{Start: start, End: end, GPUMilli: gpuMilli})
	}
	return out
}

// taskTimes is an allocation's first task start, last task finish, task
// restarts, and whether a task still runs.
func taskTimes(a *nomadapi.AllocationListStub) (start, end time.Time, restarts int, running bool) {
	for _, ts := range a.TaskStates {
		if ts == nil {
			continue
		}
		restarts += int(ts.Restarts)
		first := ts.StartedAt // StartedAt moves on a restart: the first Started event is older
		for _, ev := range ts.Events {
			if ev != nil && ev.Type == nomadapi.TaskStarted {
				if t := time.Unix(0, ev.Time); first.IsZero() || t.Before(first) {
					first = t
				}
			}
		}
		if !first.IsZero() && (start.IsZero() || first.Before(start)) {
			start = first
		}
		if ts.State == "running" {
			running = true
		}
		if ts.FinishedAt.After(end) {
			end = ts.FinishedAt
		}
	}
	return start, end, restarts, running
}

// Attained is the GPU-seconds the spans held up to now.
func (h Allocs) Attained(now time.Time) float64 {
	total := 0.0
	for _, s := range h.Spans {
		end := s.End
		if end.IsZero() || end.After(now) {
			end = now
		}
		if end.After(s.Start) {
			total += end.Sub(s.Start).Seconds() * float64(s.GPUMilli) / 1000
		}
	}
	return total
}

// Restarts counts the restarts the spans show up to now: every group of
// changes (starts and stops within Settle of the group's first) after which the
// job holds an allocation, except its first start, plus in-place task
// restarts. Stopping (a suspension, the end) is no restart; resuming is.
func (h Allocs) Restarts(now time.Time) int {
	var points []time.Time
	for _, s := range h.Spans {
		points = append(points, s.Start)
		if !s.End.IsZero() && !s.End.After(now) {
			points = append(points, s.End)
		}
	}
	sort.Slice(points, func(i, j int) bool { return points[i].Before(points[j]) })
	n, started := h.TaskRestarts, false
	for i := 0; i < len(points); {
		first, last := points[i], points[i]
		for i++; i < len(points) && points[i].Sub(first) <= Settle; i++ {
			last = points[i]
		}
		if h.holding(last) {
			if started {
				n++
			}
			started = true
		}
	}
	return n
}

// holding reports whether some span holds resources just after t.
func (h Allocs) holding(t time.Time) bool {
	for _, s := range h.Spans {
		if !s.Start.After(t) && (s.End.IsZero() || s.End.After(t)) {
			return true
		}
	}
	return false
}
