package policy

import (
	"math"
	"time"
)

// MilliGPU is the unit of GPU demand and capacity: 1000 is one whole GPU, 250
// a quarter share. A worker's GPU demand below 1000 is packed onto a single
// physical GPU; a demand of 1000 or more must be whole GPUs.
const MilliGPU = 1000

// DefaultRestartCost is the time a job loses whenever its allocation changes
// (checkpoint, reschedule, restore). The Pollux artifact charges 30 s.
const DefaultRestartCost = 30 * time.Second

// Demand is what one worker (or one parameter server) needs on a node.
type Demand struct {
	GPUMilli int `json:"gpu_milli"` // GPU in thousandths of a GPU; 0 for CPU-only tasks.
	CPUMHz   int `json:"cpu_mhz"`
	MemoryMB int `json:"memory_mb"`
}

// Shape is the resource shape a speed model is asked about.
type Shape struct {
	Workers int `json:"workers"` // workers (GPU replicas)
	PS      int `json:"ps"`      // parameter servers; 0 for all-reduce jobs
	Nodes   int `json:"nodes"`   // distinct nodes the workers span (>= 1 when Workers > 0)
}

// SpeedModel predicts a job's progress rate, in the job's progress units per
// second (training steps/s for Optimus models, goodput for statistically
// aware models), for a resource shape. It must return 0 for zero workers and
// must be cheap: the greedy calls it O(units) times per round.
type SpeedModel interface {
	Rate(s Shape) float64
}

// SpeedFunc adapts a function to SpeedModel.
type SpeedFunc func(s Shape) float64

// Rate implements SpeedModel.
func (f SpeedFunc) Rate(s Shape) float64 { return f(s) }

// NodeAlloc is a job's share of one node.
type NodeAlloc struct {
	Node    string `json:"node"` // Node.ID
	Workers int    `json:"workers"`
	PS      int    `json:"ps"`
	// GPUs lists the physical GPU indices on the node the workers use, in
	// worker order: one entry per worker for GPU shares and single-GPU
	// workers (a shared GPU repeats), GPUMilli/1000 entries per worker for
	// multi-GPU workers. Empty for CPU-only jobs.
	GPUs []int `json:"gpus,omitempty"`
}

// Allocation is what a job holds or is planned to hold.
type Allocation struct {
	Workers   int         `json:"workers"`
	PS        int         `json:"ps"`
	Placement []NodeAlloc `json:"placement"` // sorted by node ID; empty when Workers == 0
}

// Nodes is the number of distinct nodes the allocation spans.
func (a Allocation) Nodes() int {
	n := 0
	for _, p := range a.Placement {
		if p.Workers+p.PS > 0 {
			n++
		}
	}
	return n
}

// Job is one training job as a policy sees it.
type Job struct {
	ID        string
	Kind      string    // application or model family, e.g. "cifar10"; used for priors and reasons
	Submitted time.Time // arrival; FIFO and tie-breaks use it
	Priority  int       // higher first at admission; 0 by default

	Min  int  // minimum workers once admitted (0 means 1 for admission purposes)
	Max  int  // maximum workers (>= Min); 0 means Min
	Gang bool // all-or-nothing: the job runs with >= Min workers or none

	MinPS, MaxPS int // parameter servers (0,0 for all-reduce jobs)

	Worker Demand // per worker
	PSDem  Demand // per parameter server

	// Speed predicts the progress rate; Remaining is the work left in the
	// same units, so Remaining/Rate is the predicted remaining time. A nil
	// Speed means "unknown": marginal-gain policies assume linear scaling
	// (rate = workers) and Remaining = 1.
	Speed     SpeedModel
	Remaining float64

	// Current is what the job holds now (zero value if nothing).
	Current Allocation
	// AttainedService is GPU-seconds consumed so far (Tiresias, fair share).
	AttainedService float64
	// RestartCost is what starting or resuming the job costs (a restore
	// from its checkpoint); 0 means DefaultRestartCost.
	RestartCost time.Duration
	// ResizeCost is what changing a running job's workers or parameter
	// servers costs; 0 means RestartCost. An elastic job that takes new
	// workers at its next step declares much less than a restart.
	ResizeCost time.Duration
	// Age is how long the job has existed. The goodput policy discounts a
	// reshape by the share of the job's life lost to restarts (Pollux's
	// restart factor); zero means unknown and charges one RestartCost instead.
	Age time.Duration
	// Restarts counts allocation changes so far.
	Restarts int
}

func (j *Job) minWorkers() int {
	if j.Min > 0 {
		return j.Min
	}
	return 1
}

func (j *Job) maxWorkers() int {
	if j.Max < j.minWorkers() {
		return j.minWorkers()
	}
	return j.Max
}

func (j *Job) restartCost() float64 {
	if j.RestartCost > 0 {
		return j.RestartCost.Seconds()
	}
	return DefaultRestartCost.Seconds()
}

// ResizeCostSeconds is what the job says a change of a running shape
// costs it, in seconds: its ResizeCost, else its restart cost.
func (j *Job) ResizeCostSeconds() float64 {
	if j.ResizeCost > 0 {
		return j.ResizeCost.Seconds()
	}
	return j.restartCost()
}

// rate is the job's predicted progress rate with w workers, p PS on n nodes.
func (j *Job) rate(w, p, n int) float64 {
	if w <= 0 {
		return 0
	}
	if j.Speed == nil {
		return float64(w)
	}
	r := j.Speed.Rate(Shape{Workers: w, PS: p, Nodes: n})
	if math.IsNaN(r) || r < 0 {
		return 0
	}
	return r
}

func (j *Job) remaining() float64 {
	if j.Speed == nil || j.Remaining <= 0 {
		return 1
	}
	return j.Remaining
}

// Node is one client node's capacity.
type Node struct {
	ID       string `json:"id"`
	GPUs     int    `json:"gpus"` // physical GPUs; each holds MilliGPU
	CPUMHz   int    `json:"cpu_mhz"`
	MemoryMB int    `json:"memory_mb"`
	// Class groups identical nodes (informational).
	Class string `json:"class,omitempty"`
}

// Cluster is the capacity a policy may hand out.
type Cluster struct {
	Nodes []Node `json:"nodes"`
}

// Input is one scheduling round's question.
type Input struct {
	Now     time.Time
	Cluster Cluster
	Jobs    []Job
}

// JobPlan is one job's decision.
type JobPlan struct {
	ID string `json:"id"`
	Allocation
	// Changed is true when the plan differs from Job.Current in workers, PS
	// or placement: applying it costs the job a restart from checkpoint.
	Changed bool `json:"changed"`
	// Gain is the marginal gain of the last unit granted: predicted seconds
	// of remaining time saved per unit of dominant resource share (0 for
	// policies that do not use gains, or when nothing was granted).
	Gain float64 `json:"gain"`
	// PredictedRemaining is the predicted remaining time in seconds with the
	// planned allocation (+Inf when the job gets nothing, 0 if unknown).
	PredictedRemaining float64 `json:"predicted_remaining_seconds"`
	// Reason explains the decision in one line, for logs and Nomad scaling events.
	Reason string `json:"reason"`
}

// Plan is a policy's answer for one round.
type Plan struct {
	Policy string    `json:"policy"`
	Now    time.Time `json:"now"`
	Jobs   []JobPlan `json:"jobs"` // one per input job, in input order
	// Used is the total demand of the plan; Capacity the cluster's.
	UsedGPUMilli     int `json:"used_gpu_milli"`
	CapacityGPUMilli int `json:"capacity_gpu_milli"`
}

// Job returns the plan of the job with the given ID.
func (p *Plan) Job(id string) (JobPlan, bool) {
	for _, jp := range p.Jobs {
		if jp.ID == id {
			return jp, true
		}
	}
	return JobPlan{}, false
}

// Policy allocates cluster resources to jobs, one round at a time.
type Policy interface {
	// Name is the policy's registry name ("fifo", "optimus", ...).
	Name() string
	// Info is the policy's class, traits and one-line summary.
	Info() Info
	// Allocate returns a plan for every job in in.Jobs. It returns an error
	// (and no plan) only for invalid input; see Validate.
	Allocate(in Input) (Plan, error)
}
