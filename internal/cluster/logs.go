package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNotStarted: the task has not started (its allocation's prestart
	// tasks still run), so it has no logs yet.
	ErrNotStarted = errors.New("task not started yet")
	// ErrCollected: the client garbage-collected the allocation.
	ErrCollected = errors.New("allocation garbage-collected on its client")
)

// Logs returns a task's whole stdout (stderr: its stderr) with `nomad alloc
// logs`. A task not started yet is an error wrapping ErrNotStarted; an
// allocation its client has collected, one wrapping ErrCollected.
func (c *Cluster) Logs(ctx context.Context, allocID, task string, stderr bool) (string, error) {
	args := []string{"alloc", "logs"}
	if stderr {
		args = append(args, "-stderr")
	}
	out, err := c.CLI(ctx, append(args, allocID, task)...)
	switch {
	case err == nil:
		return out, nil
	case strings.Contains(err.Error(), "not started yet. No logs available"):
		// Nomad answers 404 "task ... not started yet. No logs available".
		return "", fmt.Errorf("%w: %w", ErrNotStarted, err)
	case strings.Contains(err.Error(), "not found on client"):
		return "", fmt.Errorf("%w: %w", ErrCollected, err)
	}
	return out, err
}
