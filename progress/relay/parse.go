// Package relay is the zero-code progress path: `caravan planner relay`
// runs as a sidecar task next to a training task, follows the training
// task's log in the shared allocation directory, parses progress lines
// (logfmt: `step=1200 loss=0.734 samples_per_sec=812`), and reports the
// newest to the planner with the sidecar's own workload identity (same job,
// so the planner accepts it). A script only has to print its progress.
package relay

import (
	"strconv"
	"strings"

	"github.com/caravan-nomad/caravan/progress"
)

// ParseLine reads one log line. It returns ok for a progress line: one with
// step= and loss= fields (samples_per_sec=, steps_per_sec=, batch_size=,
// grad_sqr=, grad_var=, gpu_memory_peak_bytes=, gpu_out_of_memory= are optional). A line starting with "final" marks training done; a line
// starting with "checkpoint" with a step marks a committed checkpoint
// (checkpoint is true, ok false: it carries no loss).
func ParseLine(line string) (s progress.Sample, ok, checkpoint bool) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return s, false, false
	}
	first := fields[0]
	var haveStep, haveLoss bool
	for _, f := range fields {
		k, v, found := strings.Cut(f, "=")
		if !found {
			continue
		}
		v = strings.Trim(v, `",`)
		switch k {
		case "step":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return progress.Sample{}, false, false
			}
			s.Step, haveStep = n, true
		case "loss":
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return progress.Sample{}, false, false
			}
			s.Loss, haveLoss = x, true
		case "samples_per_sec":
			if x, err := strconv.ParseFloat(v, 64); err == nil {
				s.SamplesPerSec = x
			}
		case "steps_per_sec":
			if x, err := strconv.ParseFloat(v, 64); err == nil {
				s.StepsPerSec = x
			}
		case "batch_size":
			if n, err := strconv.Atoi(v); err == nil {
				s.BatchSize = n
			}
		case "grad_sqr":
			if x, err := strconv.ParseFloat(v, 64); err == nil {
				s.GradSqr = x
			}
		case "grad_var":
			if x, err := strconv.ParseFloat(v, 64); err == nil {
				s.GradVar = x
			}
		case "gpu_memory_peak_bytes":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return progress.Sample{}, false, false
			}
			s.GPUMemoryPeakBytes = n
		case "gpu_out_of_memory":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return progress.Sample{}, false, false
			}
			s.GPUOutOfMemory = b
		}
	}
	if first == "checkpoint" && haveStep {
		return s, false, true
	}
	if !haveStep || !haveLoss {
		return progress.Sample{}, false, false
	}
	s.Done = first == "final"
	if s.Validate() != nil {
		return progress.Sample{}, false, false
	}
	return s, true, false
}
