package testbed

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The trainer's groups and tasks (jobspecs/train-elastic.nomad.hcl).
const (
	psGroup     = "ps"
	workerGroup = "worker"
)

// Task events the caravan driver writes (driver/events.go).
const (
	eventSaved    = "Checkpoint saved"
	eventRestored = "Checkpoint restored"
	eventRestart  = "Restarting" // Nomad's own, for an in-place task restart
	detailBytes   = "bytes"
)

// Event is one Nomad task event, as much as the metrics need.
type Event struct {
	Time    time.Time         `json:"time"`
	Type    string            `json:"type"`
	Message string            `json:"message"`
	Details map[string]string `json:"details,omitempty"`
}

// AllocRecord is what Nomad reported about one allocation of a testbed job
// (its single task's state; both groups have one task).
type AllocRecord struct {
	ID       string    `json:"id"`
	Group    string    `json:"group"`
	Node     string    `json:"node"`
	Created  time.Time `json:"created"`
	Started  time.Time `json:"started"`  // zero if the task never started
	Finished time.Time `json:"finished"` // zero if still running
	Status   string    `json:"client_status"`
	Events   []Event   `json:"events"`
}

// JobRecord is one testbed job's history as read from Nomad.
type JobRecord struct {
	Name      string        `json:"name"`
	Submitted time.Time     `json:"submitted"` // version 0's submit time
	Dead      bool          `json:"dead"`
	Allocs    []AllocRecord `json:"allocs"`
}

// JobMetrics are one job's figures, from its Nomad history.
type JobMetrics struct {
	Name      string
	Submitted time.Time
	// Started is the first worker's start; Finished the last task's end
	// (zero while the job runs).
	Started, Finished time.Time
	JCT               time.Duration // Finished - Submitted (0 if unfinished)
	Queued            time.Duration // Started - Submitted
	// WorkerSeconds are worker-task seconds (GPU seconds when a worker
	// holds a whole GPU).
	WorkerSeconds float64
	// Restarts are checkpoint restores plus in-place task restarts.
	Restarts int
	// Checkpoints are saved checkpoints; CheckpointBytes their total size
	// and MaxCheckpointBytes the largest.
	Checkpoints        int
	CheckpointBytes    int64
	MaxCheckpointBytes int64
	Allocs             int
	MaxWorkers         int
}

// JobMetricsOf reads one job's metrics from its record; end closes the
// intervals of tasks that still run.
func JobMetricsOf(r JobRecord, end time.Time) JobMetrics {
	m := JobMetrics{Name: r.Name, Submitted: r.Submitted, Allocs: len(r.Allocs)}
	seen := map[string]bool{} // events are re-read on every poll
	for _, a := range r.Allocs {
		if a.Group == workerGroup && !a.Started.IsZero() {
			if m.Started.IsZero() || a.Started.Before(m.Started) {
				m.Started = a.Started
			}
			m.WorkerSeconds += interval(a, end).Seconds()
		}
		if r.Dead && a.Finished.After(m.Finished) {
			m.Finished = a.Finished
		}
		for _, e := range a.Events {
			key := a.ID + "/" + e.Time.String() + "/" + e.Message
			if seen[key] {
				continue
			}
			seen[key] = true
			m.addEvent(e)
		}
	}
	if !m.Started.IsZero() {
		m.Queued = m.Started.Sub(m.Submitted)
	}
	if !m.Finished.IsZero() {
		m.JCT = m.Finished.Sub(m.Submitted)
	}
	m.MaxWorkers = maxConcurrent(r.Allocs, workerGroup, end)
	return m
}

func (m *JobMetrics) addEvent(e Event) {
	switch {
	case strings.HasPrefix(e.Message, eventSaved):
		m.Checkpoints++
		if b, err := strconv.ParseInt(e.Details[detailBytes], 10, 64); err == nil {
			m.CheckpointBytes += b
			m.MaxCheckpointBytes = max(m.MaxCheckpointBytes, b)
		}
	case strings.HasPrefix(e.Message, eventRestored), e.Type == eventRestart:
		m.Restarts++
	}
}

// interval is how long an allocation's task ran, up to end.
func interval(a AllocRecord, end time.Time) time.Duration {
	if a.Started.IsZero() {
		return 0
	}
	stop := a.Finished
	if stop.IsZero() || stop.After(end) {
		stop = end
	}
	return max(0, stop.Sub(a.Started))
}

// running reports whether the allocation's task ran at t.
func running(a AllocRecord, t time.Time) bool {
	return !a.Started.IsZero() && !t.Before(a.Started) && (a.Finished.IsZero() || t.Before(a.Finished))
}

// maxConcurrent is the most tasks of a group that ran at once.
func maxConcurrent(allocs []AllocRecord, group string, end time.Time) int {
	type edge struct {
		t time.Time
		d int
	}
	var edges []edge
	for _, a := range allocs {
		if a.Group != group || a.Started.IsZero() {
			continue
		}
		stop := a.Finished
		if stop.IsZero() {
			stop = end
		}
		edges = append(edges, edge{a.Started, 1}, edge{stop, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].t.Equal(edges[j].t) {
			return edges[i].d < edges[j].d
		}
		return edges[i].t.Before(edges[j].t)
	})
	n, best := 0, 0
	for _, e := range edges {
		n += e.d
		best = max(best, n)
	}
	return best
}

// Point is the cluster at one instant of a run.
type Point struct {
	At       time.Duration // from the run's start
	Running  int           // jobs with a running worker
	Queued   int           // submitted jobs with no running worker, not finished
	Finished int
	Workers  int     // running worker tasks
	GPUs     float64 // GPUs those workers hold
	Util     float64 // GPUs / the cluster's GPUs
}

// Cluster is the testbed cluster's GPU shape.
type Cluster struct {
	Nodes       int `json:"nodes"`
	GPUsPerNode int `json:"gpus_per_node"`
	// SharesPerGPU is the device plugin's shares per GPU; WorkerShares
	// what one worker asks for.
	SharesPerGPU int `json:"shares_per_gpu"`
	WorkerShares int `json:"worker_shares"`
}

// GPUs is the cluster's GPU count.
func (c Cluster) GPUs() int { return c.Nodes * c.GPUsPerNode }

// WorkerGPUs is the GPUs one worker holds.
func (c Cluster) WorkerGPUs() float64 {
	return float64(c.WorkerShares) / float64(max(c.SharesPerGPU, 1))
}

// Timeline samples the records every step from start to end.
func Timeline(recs []JobRecord, c Cluster, start, end time.Time, step time.Duration) []Point {
	var out []Point
	if step <= 0 || end.Before(start) {
		return out
	}
	for t := start; !t.After(end); t = t.Add(step) {
		s := Point{At: t.Sub(start)}
		for _, r := range recs {
			if r.Submitted.After(t) {
				continue
			}
			w := 0
			var last time.Time
			for _, a := range r.Allocs {
				if a.Group == workerGroup && running(a, t) {
					w++
				}
				if a.Finished.After(last) {
					last = a.Finished
				}
			}
			switch {
			case r.Dead && !last.After(t):
				s.Finished++
			case w > 0:
				s.Running++
			default:
				s.Queued++
			}
			s.Workers += w
		}
		s.GPUs = float64(s.Workers) * c.WorkerGPUs()
		s.Util = s.GPUs / float64(max(c.GPUs(), 1))
		out = append(out, s)
	}
	return out
}

// Summary is one policy run's figures.
type Summary struct {
	Policy   string
	Jobs     int
	Finished int
	AvgJCT   time.Duration // over finished jobs
	Makespan time.Duration // first submission to last completion
	// Util is worker GPU-seconds / (cluster GPUs x makespan).
	Util               float64
	Restarts           int
	Checkpoints        int
	CheckpointBytes    int64
	MaxCheckpointBytes int64
}

// Summarize aggregates job metrics.
func Summarize(policy string, jobs []JobMetrics, c Cluster) Summary {
	s := Summary{Policy: policy, Jobs: len(jobs)}
	var first, last time.Time
	var jct time.Duration
	var gpuSec float64
	for _, j := range jobs {
		if first.IsZero() || j.Submitted.Before(first) {
			first = j.Submitted
		}
		if j.Finished.After(last) {
			last = j.Finished
		}
		if !j.Finished.IsZero() {
			s.Finished++
			jct += j.JCT
		}
		gpuSec += j.WorkerSeconds * c.WorkerGPUs()
		s.Restarts += j.Restarts
		s.Checkpoints += j.Checkpoints
		s.CheckpointBytes += j.CheckpointBytes
		s.MaxCheckpointBytes = max(s.MaxCheckpointBytes, j.MaxCheckpointBytes)
	}
	if s.Finished > 0 {
		s.AvgJCT = jct / time.Duration(s.Finished)
	}
	if last.After(first) {
		s.Makespan = last.Sub(first)
		s.Util = gpuSec / (float64(c.GPUs()) * s.Makespan.Seconds())
	}
	s.Util = math.Round(s.Util*1000) / 1000
	return s
}
