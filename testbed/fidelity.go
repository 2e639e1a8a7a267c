package testbed

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/caravan-nomad/caravan/planner/simulator/steps"
)

// SimPolicy is the simulator policy a testbed run is compared with. The
// static baseline (no planner: each job at its requested workers, queued by
// Nomad) is steps.NoPlanner: the simulated Nomad places every job's
// requested workers one by one, in arrival order, as GPUs free up. That is
// closer than the simulator's fifo policy, which is all or nothing and does
// not backfill (the two agree when every job asks for one worker).
func SimPolicy(pol string) string {
	if pol == Static {
		return steps.NoPlanner
	}
	return pol
}

// SimLabel names SimPolicy(pol) in tables and CSV files.
func SimLabel(pol string) string {
	if p := SimPolicy(pol); p != steps.NoPlanner {
		return p
	}
	return "nomad-queue"
}

// Calibration is what the simulator takes from the live runs: the live
// loop's costs that the step model does not know.
type Calibration struct {
	// StepOverhead and ComputeFactor fit the measured step time as
	// StepOverhead + ComputeFactor x the modelled compute: a fixed cost per
	// step (the TCP exchange, the coordinator's bookkeeping) and the
	// workers' sleeps overshooting on a loaded machine.
	StepOverhead  time.Duration `json:"step_overhead_ns"`
	ComputeFactor float64       `json:"compute_factor"`
	// StartDelay is from submission to the first worker's start on an idle
	// cluster (Nomad's evaluation and placement, the task's start).
	StartDelay time.Duration `json:"start_delay_ns"`
	// Points is how many jobs the step fit used.
	Points int `json:"points"`
}

// Calibrate fits the step time from the runs' jobs that held one shape
// throughout (every job of a static run; a planner run's jobs that were
// never resized, suspended or restarted: (finish - start) / steps is their
// true step time) by least squares, and takes the start delay from every
// run's first job (an idle cluster). With fewer than two distinct computes
// it keeps a factor of 1 and takes the median overhead. Every run must have
// run jobs.
func Calibrate(runs []*Run, jobs []Job) Calibration {
	var xs, ys, start []float64
	for _, r := range runs {
		if len(r.Jobs) > 0 && !r.Jobs[0].Started.IsZero() {
			start = append(start, r.Jobs[0].Queued.Seconds())
		}
		for i, m := range r.Jobs {
			if i >= len(jobs) || !fixedShape(r, m, jobs[i]) {
				continue
			}
			sj := stepJob(jobs[i], 1)
			xs = append(xs, sj.StepTime(jobs[i].Workers, 0))
			ys = append(ys, m.Finished.Sub(m.Started).Seconds()/float64(jobs[i].Steps))
		}
	}
	cal := Calibration{ComputeFactor: 1, StartDelay: secs(medianOr(start, 0)), Points: len(xs)}
	a, b, ok := fitLine(xs, ys)
	if ok && b > 0 && a >= 0 {
		cal.StepOverhead, cal.ComputeFactor = secs(a), b
		return cal
	}
	over := make([]float64, len(xs))
	for i := range xs {
		over[i] = ys[i] - xs[i]
	}
	cal.StepOverhead = secs(math.Max(medianOr(over, 0), 0))
	return cal
}

// fixedShape reports whether a finished job ran at its requested workers
// from start to finish: a static run's jobs always do; a planner run's
// never resized, suspended or restarted ones too.
func fixedShape(r *Run, m JobMetrics, j Job) bool {
	if m.Finished.IsZero() || m.Started.IsZero() || m.Restarts > 0 || j.Steps <= 0 {
		return false
	}
	return r.Policy == Static || m.MaxWorkers == j.Workers
}

// LeaveOneOut calibrates for predicting run: from every other run, so that
// the run compared with the simulator took no part in the fit. ok is false
// when the other runs hold no job of one shape (then only an in-sample fit
// check is possible).
func LeaveOneOut(runs []*Run, jobs []Job, run *Run) (cal Calibration, ok bool) {
	var others []*Run
	for _, r := range runs {
		if r != run {
			others = append(others, r)
		}
	}
	cal = Calibrate(others, jobs)
	return cal, cal.Points > 0
}

// fitLine is the least-squares y = a + b x; ok is false without two
// distinct x.
func fitLine(xs, ys []float64) (a, b float64, ok bool) {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	d := n*sxx - sx*sx
	if len(xs) < 2 || d <= 1e-12*n*sxx {
		return 0, 0, false
	}
	b = (n*sxy - sx*sy) / d
	return (sy - b*sx) / n, b, true
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func medianOr(xs []float64, def float64) float64 {
	if len(xs) == 0 {
		return def
	}
	return median(xs)
}

// stepJob is a testbed job as the simulator's step model sees it (the
// trainer's default batch and micro-shards), its compute scaled by factor.
func stepJob(j Job, factor float64) steps.StepJob {
	return steps.StepJob{Name: j.Name, Submitted: j.Arrival.Seconds(), Steps: j.Steps, Requested: j.Workers,
		Batch: trainerBatch, MicroShards: trainerMicroShards, ComputePerSample: j.ComputePerSample.Seconds() * factor}
}

// SimConfig is the simulator's view of the testbed cluster and loop.
func SimConfig(cfg Config, cal Calibration) steps.StepConfig {
	return steps.StepConfig{
		Nodes: cfg.Cluster.Nodes, GPUsPerNode: cfg.Cluster.GPUsPerNode,
		WorkerMilliGPU: 1000 * cfg.Cluster.WorkerShares / max(cfg.Cluster.SharesPerGPU, 1),
		MaxWorkers:     cfg.Cluster.GPUs(),
		Interval:       cfg.Interval.Seconds(), Cooldown: cfg.Cooldown.Seconds(),
		StepOverhead: cal.StepOverhead.Seconds(),
		StartDelay:   cal.StartDelay.Seconds(), ResizeDelay: cal.StartDelay.Seconds(), ResumeDelay: cal.StartDelay.Seconds(),
		// jobspecs/planner.nomad.hcl's restart_cost.
		RestartCost: 30, SuspendQuantum: cfg.Quantum.Seconds(), ResizeCost: cfg.ResizeCost.Seconds(),
		ReportSteps: cfg.ReportSteps,
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
	// Calibration is the one this simulation used; InSample is set when it
	// was fitted on this very run (a fit check, not a prediction: no other
	// run had a job of one shape).
	Calibration Calibration
	InSample    bool
}

// CalibrationLabel names how the simulation was calibrated, for tables.
func (f Fidelity) CalibrationLabel() string {
	if f.InSample {
		return "in-sample fit check"
	}
	return "out of sample"
}

// Simulate replays the workload through the simulator for a live run.
func Simulate(run *Run, jobs []Job, cfg Config, cal Calibration) (Fidelity, error) {
	res, err := steps.SimulateSteps(SimConfig(cfg, cal), SimPolicy(run.Policy), stepJobs(jobs, cal))
	if err != nil {
		return Fidelity{}, err
	}
	f := compare(run, res)
	f.Calibration = cal
	return f, nil
}

// Predict simulates every run calibrated on the other runs (LeaveOneOut);
// a run that leaves none to calibrate on is simulated with its own fit,
// marked InSample.
func Predict(runs []*Run, jobs []Job, cfg Config) ([]Fidelity, error) {
	out := make([]Fidelity, 0, len(runs))
	for _, r := range runs {
		cal, ok := LeaveOneOut(runs, jobs, r)
		if !ok {
			cal = Calibrate([]*Run{r}, jobs)
		}
		f, err := Simulate(r, jobs, cfg, cal)
		if err != nil {
			return nil, fmt.Errorf("simulating the %s run: %w", r.Policy, err)
		}
		f.InSample = !ok
		out = append(out, f)
	}
	return out, nil
}

func stepJobs(jobs []Job, cal Calibration) []steps.StepJob {
	f := cal.ComputeFactor
	if f <= 0 {
		f = 1
	}
	out := make([]steps.StepJob, len(jobs))
	for i, j := range jobs {
		out[i] = stepJob(j, f)
	}
	return out
}

func compare(run *Run, res engine.Result) Fidelity {
	f := Fidelity{Policy: run.Policy, SimPolicy: SimLabel(run.Policy), SimMakespan: secs(res.Makespan)}
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
