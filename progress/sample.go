package progress

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// Sample is one progress report, the JSON body of POST /v1/progress.
type Sample struct {
	// Step is the number of training steps done so far (global for a
	// data-parallel job). Required.
	Step int64 `json:"step"`
	// Loss is the training loss at Step, in [MinLoss, MaxLoss]. Required.
	// Zero is refused: the planner's convergence model (Optimus's
	// l = 1/(b0*k + b1) + b2) has a positive loss at every step.
	Loss float64 `json:"loss"`
	// SamplesPerSec is the recent throughput in samples per second: the
	// whole job's when a job-level reporter sends it. Required.
	SamplesPerSec float64 `json:"samples_per_sec"`
	// StepsPerSec optionally gives the step rate directly; if 0 the planner
	// derives it from consecutive reports.
	StepsPerSec float64 `json:"steps_per_sec,omitempty"`
	// BatchSize is the global batch size, optional.
	BatchSize int `json:"batch_size,omitempty"`
	// StepsTotal is the declared total number of steps, optional.
	StepsTotal int64 `json:"steps_total,omitempty"`
	// Workers and PS are the data-parallel workers and parameter servers
	// that produced this speed, optional: the planner then attributes the
	// speed to that shape instead of the group counts it sees in Nomad.
	Workers int `json:"workers,omitempty"`
	PS      int `json:"ps,omitempty"`
	// GradSqr and GradVar are Pollux-style gradient statistics (AdaptDL's
	// gradient noise scale), optional: GradSqr estimates the squared norm
	// of the true gradient, GradVar the variance (trace of the covariance)
	// of the gradient estimate at BatchSize, i.e. the per-sample variance
	// divided by BatchSize. The planner's statistical efficiency of a batch
	// B is then gain(B/BatchSize)/(B/BatchSize) with
	// gain(s) = (GradVar+GradSqr)/(GradVar/s+GradSqr).
	GradSqr float64 `json:"grad_sqr,omitempty"`
	GradVar float64 `json:"grad_var,omitempty"`
	// GPUMemoryPeakBytes is the most GPU memory one worker process has
	// allocated since it started (torch.cuda.max_memory_allocated),
	// optional: the planner's right-sizing compares it with a share's
	// memory. 0 or absent: not measured (no CUDA).
	GPUMemoryPeakBytes int64 `json:"gpu_memory_peak_bytes,omitempty"`
	// GPUOutOfMemory is true when the task is about to exit because its
	// GPU ran out of memory (torch's OutOfMemoryError): the planner counts
	// the failure that follows as a failure class of its own and grows the
	// job's GPU shares (planner/POLICY.md, "Right-sizing"). It cannot be
	// sent with Done.
	GPUOutOfMemory bool `json:"gpu_out_of_memory,omitempty"`
	// Checkpointed is true when the task has just committed a checkpoint.
	Checkpointed bool `json:"checkpointed,omitempty"`
	// Done is true when the task finished training on its own.
	Done bool `json:"done,omitempty"`
}

// Plausibility bounds. They are far beyond any real training run and keep
// every value the planner fits its models to small enough for float64
// arithmetic (a step of 2^63-1 or a loss of 1e308 overflows a fit).
const (
	MaxStep int64   = 1_000_000_000_000_000 // 1e15 steps
	MaxLoss float64 = 1e12
	// MinLoss is the smallest loss accepted: the planner's convergence
	// model needs a positive loss (0 and -0 are refused, not modelled).
	MinLoss          float64 = 1e-30
	MaxSamplesPerSec float64 = 1e9
	MaxStepsPerSec   float64 = 1e6
	MaxBatchSize             = 1 << 30
	MaxWorkers               = 100_000 // also bounds ps
	MaxGradStat      float64 = 1e30
	// MaxGPUMemoryPeakBytes bounds gpu_memory_peak_bytes (16 TiB, the
	// most memory a GPU of the device plugin's simulated backend may have;
	// no real GPU has as much).
	MaxGPUMemoryPeakBytes int64 = 1 << 44
	// StepSlack is the step advance always allowed between two reports,
	// on top of MaxStepsPerSec times the time between them.
	StepSlack int64 = 1_000_000
)

// ErrBadSample wraps every validation error of a Sample.
var ErrBadSample = errors.New("invalid progress sample")

// FieldError is a validation error naming the JSON field at fault.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s: %s", ErrBadSample, e.Field, e.Msg) }

// Unwrap makes errors.Is(err, ErrBadSample) hold.
func (e *FieldError) Unwrap() error { return ErrBadSample }

func bad(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks each value against its type's domain and the plausibility
// bounds. The error names the field.
func (s Sample) Validate() error {
	if s.Step < 0 || s.Step > MaxStep {
		return bad("step", "must be in [0, %d], got %d", MaxStep, s.Step)
	}
	if s.StepsTotal < 0 || s.StepsTotal > MaxStep {
		return bad("steps_total", "must be in [0, %d], got %d", MaxStep, s.StepsTotal)
	}
	if s.GPUMemoryPeakBytes < 0 || s.GPUMemoryPeakBytes > MaxGPUMemoryPeakBytes {
		return bad("gpu_memory_peak_bytes", "must be in [0, %d] (16 TiB), got %d", MaxGPUMemoryPeakBytes, s.GPUMemoryPeakBytes)
	}
	if s.GPUOutOfMemory && s.Done {
		return bad("gpu_out_of_memory", "a report cannot say both that training is done and that it ran out of GPU memory")
	}
	if math.IsNaN(s.Loss) || s.Loss < MinLoss || s.Loss > MaxLoss {
		return bad("loss", "must be a finite number in [%g, %g] (the convergence model needs a positive loss), got %v",
			MinLoss, MaxLoss, s.Loss)
	}
	floats := []struct {
		field  string
		v, max float64
	}{
		{"samples_per_sec", s.SamplesPerSec, MaxSamplesPerSec},
		{"steps_per_sec", s.StepsPerSec, MaxStepsPerSec},
		{"grad_sqr", s.GradSqr, MaxGradStat},
		{"grad_var", s.GradVar, MaxGradStat},
	}
	for _, f := range floats {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 || f.v > f.max {
			return bad(f.field, "must be a finite number in [0, %g], got %v", f.max, f.v)
		}
	}
	ints := []struct {
		field  string
		v, max int
	}{
		{"batch_size", s.BatchSize, MaxBatchSize},
		{"workers", s.Workers, MaxWorkers},
		{"ps", s.PS, MaxWorkers},
	}
	for _, f := range ints {
		if f.v < 0 || f.v > f.max {
			return bad(f.field, "must be in [0, %d], got %d", f.max, f.v)
		}
	}
	return nil
}

// ValidateAfter checks s as the successor of prev, reported elapsed earlier
// for the same job: the step may go back (a restart from a checkpoint, a new
// incarnation), but may not advance faster than MaxStepsPerSec allows (plus
// StepSlack). It does not repeat Validate.
func (s Sample) ValidateAfter(prev Sample, elapsed time.Duration) error {
	if s.Step <= prev.Step {
		return nil
	}
	allowed := float64(StepSlack) + MaxStepsPerSec*math.Max(elapsed.Seconds(), 0)
	if d := s.Step - prev.Step; float64(d) > allowed {
		return bad("step", "advanced by %d since the previous report (step %d, %s ago): more than %.0f is implausible",
			d, prev.Step, elapsed.Round(time.Millisecond), allowed)
	}
	return nil
}

// MaxBody bounds a progress request body.
const MaxBody = 64 << 10

// Decode reads one sample from a request body (at most MaxBody bytes) and
// validates it. step, loss and samples_per_sec must be present; unknown
// fields are ignored (a trainer may send its own labels).
func Decode(r io.Reader) (Sample, error) {
	raw, err := io.ReadAll(io.LimitReader(r, MaxBody+1))
	if err != nil {
		return Sample{}, fmt.Errorf("%w: reading body: %v", ErrBadSample, err)
	}
	if len(raw) > MaxBody {
		return Sample{}, fmt.Errorf("%w: body larger than %d bytes", ErrBadSample, MaxBody)
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(raw, &present); err != nil {
		return Sample{}, fmt.Errorf("%w: not a JSON object: %v", ErrBadSample, err)
	}
	for _, k := range []string{"step", "loss", "samples_per_sec"} {
		if v, ok := present[k]; !ok || string(v) == "null" {
			return Sample{}, bad(k, "is required")
		}
	}
	var s Sample
	if err := json.Unmarshal(raw, &s); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return Sample{}, bad(te.Field, "want %s, got JSON %s", te.Type, te.Value)
		}
		return Sample{}, fmt.Errorf("%w: %v", ErrBadSample, err)
	}
	return s, s.Validate()
}
