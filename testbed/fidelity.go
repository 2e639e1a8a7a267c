package testbed

import (
	"math"
	"sort"
	"time"

	"github.com/caravan-nomad/caravan/planner/simulator"
)

// SimPolicy is the simulator policy a testbed run is compared with. The
// static baseline (no planner: each job at its requested workers, queued by
// Nomad) maps to fifo: requested size, all or nothing, arrival order. Nomad
// places a job's worker allocations one by one rather than all or nothing,
// which differs only for jobs that ask for more than one worker.
func SimPolicy(pol string) string {
	if pol == Static {
		return "fifo"
	}
	return pol
}

// Calibration is what the simulator takes from the live runs: the live
// loop's costs that the trace model does not have.
type Calibration struct {
	// StepOverhead is the measured per-step cost beyond the modelled
	// compute (the TCP exchange and the coordinator's bookkeeping).
	StepOverhead time.Duration `json:"step_overhead_ns"`
	// StartDelay is from submission to the first worker's start on an idle
	// cluster (Nomad's evaluation and placement, the task's start).
	StartDelay time.Duration `json:"start_delay_ns"`
}

// Calibrate measures the overhead from the static run's jobs (a fixed
// worker count, never resized: steps/(finish-start) is their true speed)
// and the start delay from every run's first job (an idle cluster).
func Calibrate(runs []*Run, jobs []Job, batch, microShards int) Calibration {
	var over, start []float64
	for _, r := range runs {
		if len(r.Jobs) > 0 && !r.Jobs[0].Started.IsZero() {
			start = append(start, r.Jobs[0].Queued.Seconds())
		}
		if r.Policy != Static {
			continue
		}
		for i, m := range r.Jobs {
			if m.Finished.IsZero() || m.Started.IsZero() || m.Restarts > 0 || i >= len(jobs) {
				continue
			}
			sj := stepJob(jobs[i], batch, microShards)
			perStep := m.Finished.Sub(m.Started).Seconds() / float64(jobs[i].Steps)
			over = append(over, perStep-sj.StepTime(jobs[i].Workers, 0))
		}
	}
	return Calibration{StepOverhead: secs(math.Max(medianOr(over, 0), 0)), StartDelay: secs(medianOr(start, 0))}
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func medianOr(xs []float64, def float64) float64 {
	if len(xs) == 0 {
		return def
	}
	return median(xs)
}

func stepJob(j Job, batch, microShards int) simulator.StepJob {
	return simulator.StepJob{Name: j.Name, Submitted: j.Arrival.Seconds(), Steps: j.Steps, Requested: j.Workers,
		Batch: batch, MicroShards: microShards, ComputePerSample: j.ComputePerSample.Seconds()}
}

// SimConfig is the simulator's view of the testbed cluster and loop.
func SimConfig(cfg Config, cal Calibration) simulator.StepConfig {
	return simulator.StepConfig{
		Nodes: cfg.Cluster.Nodes, GPUsPerNode: cfg.Cluster.GPUsPerNode,
		WorkerMilliGPU: 1000 * cfg.Cluster.WorkerShares / max(cfg.Cluster.SharesPerGPU, 1),
		MaxWorkers:     cfg.Cluster.GPUs(),
		Interval:       cfg.Interval.Seconds(), Cooldown: cfg.Cooldown.Seconds(),
		StepOverhead: cal.StepOverhead.Seconds(),
		StartDelay:   cal.StartDelay.Seconds(), ResizeDelay: cal.StartDelay.Seconds(), ResumeDelay: cal.StartDelay.Seconds(),
		// jobspecs/planner.nomad.hcl's restart_cost and suspend_quantum.
		RestartCost: 30, SuspendQuantum: 600,
	}
}

// Fidelity compares one live run with its simulation.
type Fidelity struct {
	Policy    string
	SimPolicy string
	// LiveAvgJCT and SimAvgJCT are over the jobs finished live.
	LiveAvgJCT, SimAvgJCT time.Duration
	// Error is (sim - live) / live of the mean JCT.
	Error float64
	// JobSim and JobError are per job, workload order.
	JobSim      []time.Duration
	JobError    []float64 `json:"-"` // in jobs.csv; NaN for an unfinished job
	SimMakespan time.Duration
}

// Simulate replays the workload through the simulator for a live run.
func Simulate(run *Run, jobs []Job, sc simulator.StepConfig, batch, microShards int) (Fidelity, error) {
	sjs := make([]simulator.StepJob, len(jobs))
	for i, j := range jobs {
		sjs[i] = stepJob(j, batch, microShards)
	}
	res, err := simulator.SimulateSteps(sc, SimPolicy(run.Policy), sjs)
	if err != nil {
		return Fidelity{}, err
	}
	return compare(run, res), nil
}

func compare(run *Run, res simulator.Result) Fidelity {
	f := Fidelity{Policy: run.Policy, SimPolicy: res.Policy, SimMakespan: secs(res.Makespan)}
	var live, sim float64
	n := 0
	for i, jr := range res.Jobs {
		f.JobSim = append(f.JobSim, secs(jr.JCT))
		e := math.NaN()
		if i < len(run.Jobs) && run.Jobs[i].JCT > 0 {
			l := run.Jobs[i].JCT.Seconds()
			e = (jr.JCT - l) / l
			live += l
			sim += jr.JCT
			n++
		}
		f.JobError = append(f.JobError, e)
	}
	if n > 0 {
		f.LiveAvgJCT, f.SimAvgJCT = secs(live/float64(n)), secs(sim/float64(n))
		f.Error = (sim - live) / live
	}
	return f
}

// MaxAbsJobError is the largest per-job error, ignoring unfinished jobs.
func (f Fidelity) MaxAbsJobError() float64 {
	errs := make([]float64, 0, len(f.JobError))
	for _, e := range f.JobError {
		if !math.IsNaN(e) {
			errs = append(errs, math.Abs(e))
		}
	}
	sort.Float64s(errs)
	if len(errs) == 0 {
		return 0
	}
	return errs[len(errs)-1]
}
