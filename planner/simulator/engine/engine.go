// Package engine is what the simulator's engines share: the simulated
// cluster's Config, the Result of a replay, simulated time's Epoch, the
// artifact's RestartPenalty, and the planning round every engine runs with
// or without team queues (PlanWithQueues, the live planner's code). The
// engines are pollux (Simulate: the Pollux workloads, speed from measured
// traces), steps (SimulateSteps: the testbed's step-time model), philly
// (ReplayPhilly, ReplayPhillyQueues: the Philly trace's 82k jobs) and
// packsim (Run: GPU sharing). Each builds its policy jobs from a
// history.Record (Record.PolicyJob), as the live manager does.
package engine

import (
	"errors"
	"time"

	"github.com/caravan-nomad/caravan/planner/queue"
)

// RestartPenalty is the artifact's rescale delay: a job whose allocation
// changes makes no progress for 30 s (checkpoint, restart, restore) while
// holding its new GPUs.
const RestartPenalty = 30.0

// ErrStuck is returned when a replay stops making progress (a job can
// never be scheduled).
var ErrStuck = errors.New("simulation stuck")

// Config describes the simulated cluster and loop.
type Config struct {
	Nodes       int     // default 16
	GPUsPerNode int     // default 4
	Interval    float64 // scheduling interval, seconds; default 60
	// MaxTime bounds simulated time (seconds); 0 means 60 days.
	MaxTime float64
	// Interference slows a multi-node job down by this fraction while it
	// shares a node with another multi-node job (the artifact's
	// --interference; 0 by default, as in the published runs).
	Interference float64
	// Record keeps every round's allocation in Result.Trace (for --out).
	Record bool
	// Queues, when it names any queue, runs every round through the team
	// queues (PlanWithQueues, the live planner's code); Namespaces maps a
	// workload job's name to its Nomad namespace (unlisted: "default").
	// Simulate and ReplayPhilly read them (ReplayPhilly: a job's namespace
	// is its trace row's virtual cluster).
	Queues     queue.Config
	Namespaces map[string]string
}

// WithDefaults fills in the defaults of the fields left at zero.
func (c Config) WithDefaults() Config {
	if c.Nodes <= 0 {
		c.Nodes = 16
	}
	if c.GPUsPerNode <= 0 {
		c.GPUsPerNode = 4
	}
	if c.Interval <= 0 {
		c.Interval = 60
	}
	if c.MaxTime <= 0 {
		c.MaxTime = 60 * 24 * 3600
	}
	return c
}

// JobResult is one finished job.
type JobResult struct {
	Name        string  `json:"name"`
	Application string  `json:"application"`
	Submitted   float64 `json:"submitted_s"`
	Completed   float64 `json:"completed_s"`
	JCT         float64 `json:"jct_s"`
	Restarts    int     `json:"restarts"`
}

// Result summarises a replay.
type Result struct {
	Policy   string
	Workload string
	Jobs     []JobResult // workload order
	AvgJCT   float64     // seconds
	Makespan float64     // seconds from the first submission to the last completion
	GPUUtil  float64     // allocated GPU-seconds / (GPUs x makespan)
	Rounds   int
	Restarts int
	// DecideTime is the wall time spent inside the policy.
	DecideTime time.Duration
	// GPUs is the cluster's size; Trace, with Config.Record, the GPUs each
	// job held in every interval.
	GPUs  int
	Trace []TraceRound
}

// TraceRound is the allocation in effect from Time for one interval.
type TraceRound struct {
	Time float64 // seconds since the simulation's start
	GPUs []int   // by job, in workload order
}

// Epoch is simulated time zero, as a wall-clock time for the policies.
var Epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// At is sec simulated seconds as a wall-clock time.
func At(sec float64) time.Time { return Epoch.Add(Seconds(sec)) }

// Seconds is sec seconds as a duration.
func Seconds(sec float64) time.Duration { return time.Duration(sec * float64(time.Second)) }
