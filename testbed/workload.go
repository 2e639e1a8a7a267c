package testbed

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/caravan-nomad/caravan/planner/workload"
)

// Job is one training job of a testbed workload, already scaled to the
// testbed: it is what is submitted (jobspecs/train-elastic.nomad.hcl) and
// what the simulator replays.
type Job struct {
	// Name is the Nomad job ID ("tb-<trace name>").
	Name string `json:"name"`
	// Model is the trace's application (cifar10, bert, ...).
	Model string `json:"model"`
	// Arrival is the submission time from the run's start.
	Arrival time.Duration `json:"arrival_ns"`
	// Workers is the requested worker count (the static baseline's fixed
	// size; the planner's starting size is 1).
	Workers int `json:"workers"`
	// Steps is the training length in SGD steps.
	Steps int `json:"steps"`
	// ComputePerSample is the MODELLED compute time per sample.
	ComputePerSample time.Duration `json:"compute_per_sample_ns"`
	// TraceSteps, TraceSecondsPerSample and TraceReplicas are the unscaled
	// figures the job was derived from.
	TraceSteps            float64 `json:"trace_steps"`
	TraceSecondsPerSample float64 `json:"trace_seconds_per_sample"`
	TraceReplicas         int     `json:"trace_replicas"`
	TraceArrival          float64 `json:"trace_arrival_s"`
}

// Work is the job's modelled compute on one worker: steps x batch x
// compute per sample (the gradient exchange is not counted).
func (j Job) Work(batch int) time.Duration {
	return time.Duration(float64(j.Steps) * float64(batch) * float64(j.ComputePerSample))
}

// SampleOptions say how a workload is drawn from a trace and scaled.
type SampleOptions struct {
	Jobs int    // how many jobs (12..24 by default)
	Seed uint64 // sampling seed
	// Window is the span the arrivals are scaled into.
	Window time.Duration
	// MedianCompute is what the median job's compute per sample is scaled to.
	MedianCompute time.Duration
	// TotalWork is what the jobs' one-worker work (Job.Work) sums to
	// before clamping.
	TotalWork time.Duration
	// MinWork and MaxWork clamp one job's one-worker work.
	MinWork, MaxWork time.Duration
	// Spread is the exponent applied to each job's traced work before the
	// scaling (1 keeps the trace's ratios; 0.5, the default, takes their
	// square root, so that one traced ImageNet job does not outweigh the
	// rest of a 12-job run on 4 GPUs). ComputeSpread clamps a job's compute
	// per sample to [median/ComputeSpread, median*ComputeSpread].
	Spread, ComputeSpread float64
	// Batch is the trainer's global batch (samples per step).
	Batch int
	// GPUs is the testbed's GPU count; TraceGPUs the traced cluster's
	// (requested workers are scaled by GPUs/TraceGPUs, at least 1).
	GPUs, TraceGPUs int
	// Prefix starts every job name.
	Prefix string
}

// DefaultSampleOptions is the default workload: 12 jobs arriving over 4
// minutes, 12 one-worker minutes of work on the local cluster's 4 GPUs
// (about 5 minutes a run, 20 for the three).
func DefaultSampleOptions() SampleOptions {
	return SampleOptions{
		Jobs: 12, Seed: 1, Window: 4 * time.Minute, MedianCompute: 2 * time.Millisecond,
		TotalWork: 12 * time.Minute, MinWork: 20 * time.Second, MaxWork: 3 * time.Minute,
		Spread: 0.5, ComputeSpread: 4, Batch: 64, GPUs: 4, TraceGPUs: 64, Prefix: "tb-",
	}
}

func (o SampleOptions) validate() error {
	switch {
	case o.Jobs < 1:
		return fmt.Errorf("jobs: must be at least 1, got %d", o.Jobs)
	case o.Window < 0:
		return fmt.Errorf("window: must not be negative, got %s", o.Window)
	case o.MedianCompute <= 0:
		return fmt.Errorf("compute: must be positive, got %s", o.MedianCompute)
	case o.TotalWork <= 0:
		return fmt.Errorf("work: must be positive, got %s", o.TotalWork)
	case o.MinWork <= 0 || o.MaxWork < o.MinWork:
		return fmt.Errorf("min/max work: need 0 < min <= max, got %s and %s", o.MinWork, o.MaxWork)
	case o.Spread <= 0 || o.Spread > 1:
		return fmt.Errorf("spread: must be in (0, 1], got %g", o.Spread)
	case o.ComputeSpread < 1:
		return fmt.Errorf("compute-spread: must be at least 1, got %g", o.ComputeSpread)
	case o.Batch < 1:
		return fmt.Errorf("batch: must be at least 1, got %d", o.Batch)
	case o.GPUs < 1 || o.TraceGPUs < 1:
		return fmt.Errorf("gpus: must be at least 1, got %d (trace %d)", o.GPUs, o.TraceGPUs)
	}
	return nil
}

// ModelCost is what a trace says about one model: seconds of compute per
// sample on one GPU, and the steps a job of a given batch trains for.
type ModelCost struct {
	SecondsPerSample float64
	// Steps maps a global batch size to the steps to the trace's end.
	Steps map[int]float64
}

// stepsFor returns the steps of the validation run with the nearest batch.
func (m ModelCost) stepsFor(batch int) float64 {
	best, bestD := 0.0, math.Inf(1)
	for b, s := range m.Steps {
		if d := math.Abs(math.Log(float64(b)) - math.Log(float64(max(batch, 1)))); d < bestD || (d == bestD && s > best) {
			best, bestD = s, d
		}
	}
	return best
}

// CostsFromTraces reads per-sample compute from placements.csv (the
// one-GPU row with the smallest local batch: step time / local batch) and
// steps from the last row of each validation-<batch>.csv.
func CostsFromTraces(traces map[string]*workload.Trace) (map[string]ModelCost, error) {
	out := map[string]ModelCost{}
	for name, tr := range traces {
		c := ModelCost{Steps: map[int]float64{}}
		bsz := math.Inf(1)
		for _, r := range tr.Placements {
			if len(r.Placement) == 1 && r.Placement[0] == 1 && r.LocalBsz > 0 && r.LocalBsz < bsz {
				bsz, c.SecondsPerSample = r.LocalBsz, r.StepTime/r.LocalBsz
			}
		}
		for b, rows := range tr.Validation {
			if len(rows) > 0 {
				c.Steps[b] = rows[len(rows)-1].Iteration
			}
		}
		if c.SecondsPerSample <= 0 || len(c.Steps) == 0 {
			return nil, fmt.Errorf("trace %s: no one-GPU placement row or no validation rows", name)
		}
		out[name] = c
	}
	return out, nil
}

// SampleWorkload draws opts.Jobs jobs from a trace workload (without
// replacement, seeded) and scales them to the testbed: arrivals linearly
// into opts.Window; compute per sample from the model's one-GPU step time,
// scaled so the median job's is opts.MedianCompute (clamped to
// ComputeSpread either side); steps so each job's one-worker work is its
// traced one-GPU time (steps x batch x seconds per sample) to the power
// Spread, normalised to sum to opts.TotalWork and clamped to [MinWork,
// MaxWork]. The order of jobs by size comes from the trace.
func SampleWorkload(trace []workload.Job, costs map[string]ModelCost, opts SampleOptions) ([]Job, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if len(trace) < opts.Jobs {
		return nil, fmt.Errorf("jobs: the trace has %d jobs, fewer than the %d asked for", len(trace), opts.Jobs)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x7e57bed))
	picked := make([]workload.Job, 0, opts.Jobs)
	for _, i := range rng.Perm(len(trace))[:opts.Jobs] {
		picked = append(picked, trace[i])
	}
	sort.SliceStable(picked, func(a, b int) bool { return picked[a].Time < picked[b].Time })
	jobs := make([]Job, len(picked))
	perSample := make([]float64, len(picked))
	for i, tj := range picked {
		c, ok := costs[tj.Application]
		if !ok {
			return nil, fmt.Errorf("job %s: no trace for model %q", tj.Name, tj.Application)
		}
		jobs[i] = Job{Name: opts.Prefix + tj.Name, Model: tj.Application, TraceSteps: c.stepsFor(tj.BatchSize),
			TraceSecondsPerSample: c.SecondsPerSample, TraceReplicas: tj.Replicas, TraceArrival: tj.Time,
			Workers: min(opts.GPUs, max(1, int(math.Ceil(float64(tj.Replicas)*float64(opts.GPUs)/float64(opts.TraceGPUs)))))}
		perSample[i] = c.SecondsPerSample
	}
	scaleArrivals(jobs, opts.Window)
	med := median(perSample)
	cScale := opts.MedianCompute.Seconds() / med
	traced := make([]float64, len(jobs)) // traced one-GPU seconds, compressed
	var sum float64
	for i := range jobs {
		ps := math.Min(math.Max(jobs[i].TraceSecondsPerSample, med/opts.ComputeSpread), med*opts.ComputeSpread)
		jobs[i].ComputePerSample = roundCompute(ps * cScale)
		traced[i] = math.Pow(jobs[i].TraceSteps*jobs[i].TraceSecondsPerSample*float64(max(picked[i].BatchSize, 1)), opts.Spread)
		sum += traced[i]
	}
	if sum <= 0 || math.IsNaN(sum) {
		return nil, errors.New("the sampled jobs have no work in the trace")
	}
	for i := range jobs {
		stepSec := float64(opts.Batch) * jobs[i].ComputePerSample.Seconds()
		work := traced[i] / sum * opts.TotalWork.Seconds()
		work = math.Min(math.Max(work, opts.MinWork.Seconds()), opts.MaxWork.Seconds())
		jobs[i].Steps = max(1, int(math.Round(work/stepSec)))
	}
	return jobs, nil
}

// scaleArrivals maps trace arrival times linearly onto [0, window].
func scaleArrivals(jobs []Job, window time.Duration) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, j := range jobs {
		lo, hi = math.Min(lo, j.TraceArrival), math.Max(hi, j.TraceArrival)
	}
	for i := range jobs {
		if hi > lo {
			jobs[i].Arrival = time.Duration((jobs[i].TraceArrival - lo) / (hi - lo) * float64(window)).Round(time.Second)
		}
	}
}

// roundCompute keeps compute per sample to 10µs, at least 10µs.
func roundCompute(sec float64) time.Duration {
	return max(10*time.Microsecond, time.Duration(sec*float64(time.Second)).Round(10*time.Microsecond))
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
