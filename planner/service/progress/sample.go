// Package progress ingests training progress from tasks: the HTTP handler
// behind POST /v1/progress, the verification of the Nomad workload identity
// that proves which job a report belongs to, the per-job store the manager
// fits models from, and Report, the client a trainer calls.
package progress

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Sample is one progress report, as a task sends it (JSON body of
// POST /v1/progress). Which job it belongs to is not in the body: it comes
// from the verified identity token.
type Sample struct {
	// Step is the number of training steps (iterations) done so far.
	Step int64 `json:"step"`
	// Loss is the training loss at Step.
	Loss float64 `json:"loss"`
	// SamplesPerSec is this task's recent throughput in samples per second.
	SamplesPerSec float64 `json:"samples_per_sec"`
	// StepsPerSec optionally gives the step rate directly; if 0 the planner
	// derives it from consecutive reports.
	StepsPerSec float64 `json:"steps_per_sec,omitempty"`
	// BatchSize is the (global) batch size, optional.
	BatchSize int `json:"batch_size,omitempty"`
	// Checkpointed is true when the task has just committed a checkpoint
	// (a final checkpoint lets the planner stop a converged job).
	Checkpointed bool `json:"checkpointed,omitempty"`
	// Done is true when the task finished training on its own.
	Done bool `json:"done,omitempty"`
}

// ErrBadSample wraps every validation error of a Sample.
var ErrBadSample = errors.New("invalid progress sample")

// Validate checks a sample's values.
func (s Sample) Validate() error {
	switch {
	case s.Step < 0:
		return fmt.Errorf("%w: step must not be negative, got %d", ErrBadSample, s.Step)
	case math.IsNaN(s.Loss) || math.IsInf(s.Loss, 0) || s.Loss < 0:
		return fmt.Errorf("%w: loss must be a finite non-negative number, got %v", ErrBadSample, s.Loss)
	case math.IsNaN(s.SamplesPerSec) || math.IsInf(s.SamplesPerSec, 0) || s.SamplesPerSec < 0:
		return fmt.Errorf("%w: samples_per_sec must be a finite non-negative number, got %v", ErrBadSample, s.SamplesPerSec)
	case math.IsNaN(s.StepsPerSec) || math.IsInf(s.StepsPerSec, 0) || s.StepsPerSec < 0:
		return fmt.Errorf("%w: steps_per_sec must be a finite non-negative number, got %v", ErrBadSample, s.StepsPerSec)
	case s.BatchSize < 0:
		return fmt.Errorf("%w: batch_size must not be negative, got %d", ErrBadSample, s.BatchSize)
	}
	return nil
}

// Record is a stored sample with where and when it came from.
type Record struct {
	Sample
	Time         time.Time `json:"time"`
	AllocationID string    `json:"allocation_id"`
	Task         string    `json:"task"`
}
