package policy

import (
	"errors"
	"fmt"
)

// ErrInvalidInput wraps every validation failure; test with errors.Is.
var ErrInvalidInput = errors.New("invalid policy input")

// Validate checks an Input for problems a policy cannot decide around:
// duplicate or empty IDs, negative limits, Min > Max and negative demands.
// A current placement on a node that has vanished is not an error: the job is
// simply placed again.
func Validate(in Input) error {
	nodes := make(map[string]struct{}, len(in.Cluster.Nodes))
	for i, n := range in.Cluster.Nodes {
		if n.ID == "" {
			return fmt.Errorf("%w: node %d has an empty ID", ErrInvalidInput, i)
		}
		if _, dup := nodes[n.ID]; dup {
			return fmt.Errorf("%w: duplicate node ID %q", ErrInvalidInput, n.ID)
		}
		if n.GPUs < 0 || n.CPUMHz < 0 || n.MemoryMB < 0 {
			return fmt.Errorf("%w: node %q has negative capacity", ErrInvalidInput, n.ID)
		}
		nodes[n.ID] = struct{}{}
	}
	jobs := make(map[string]struct{}, len(in.Jobs))
	for i := range in.Jobs {
		j := &in.Jobs[i]
		if j.ID == "" {
			return fmt.Errorf("%w: job %d has an empty ID", ErrInvalidInput, i)
		}
		if _, dup := jobs[j.ID]; dup {
			return fmt.Errorf("%w: duplicate job ID %q", ErrInvalidInput, j.ID)
		}
		jobs[j.ID] = struct{}{}
		switch {
		case j.Min < 0 || j.Max < 0 || j.MinPS < 0 || j.MaxPS < 0:
			return fmt.Errorf("%w: job %q has a negative limit", ErrInvalidInput, j.ID)
		case j.Max > 0 && j.Max < j.Min:
			return fmt.Errorf("%w: job %q has max %d below min %d", ErrInvalidInput, j.ID, j.Max, j.Min)
		case j.MaxPS < j.MinPS:
			return fmt.Errorf("%w: job %q has max_ps %d below min_ps %d", ErrInvalidInput, j.ID, j.MaxPS, j.MinPS)
		case j.Worker.GPUMilli < 0 || j.Worker.CPUMHz < 0 || j.Worker.MemoryMB < 0 ||
			j.PSDem.GPUMilli < 0 || j.PSDem.CPUMHz < 0 || j.PSDem.MemoryMB < 0:
			return fmt.Errorf("%w: job %q has a negative demand", ErrInvalidInput, j.ID)
		case j.Worker.GPUMilli > MilliGPU && j.Worker.GPUMilli%MilliGPU != 0:
			return fmt.Errorf("%w: job %q asks %d milli-GPUs per worker: above one GPU only whole GPUs are allowed",
				ErrInvalidInput, j.ID, j.Worker.GPUMilli)
		case j.PSDem.GPUMilli > 0:
			return fmt.Errorf("%w: job %q: parameter servers are CPU-only, got %d milli-GPUs", ErrInvalidInput, j.ID, j.PSDem.GPUMilli)
		case j.Remaining < 0:
			return fmt.Errorf("%w: job %q has negative remaining work", ErrInvalidInput, j.ID)
		}
	}
	return nil
}
