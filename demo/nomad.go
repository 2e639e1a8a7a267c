package demo

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/internal/allocs"
)

// submit runs a jobspec with the Nomad CLI, as a user does.
func (d *Demo) submit(ctx context.Context, jobspec, jobID string, vars ...string) error {
	args := []string{"job", "run", "-detach"}
	for _, v := range vars {
		args = append(args, "-var", v)
	}
	args = append(args, filepath.Join(d.cfg.Root, jobspec))
	if _, err := d.cli(ctx, args...); err != nil {
		return err
	}
	d.say("nomad job run %s  (job %s)", jobspec, jobID)
	d.jobs = append(d.jobs, jobID)
	return nil
}

func (d *Demo) cli(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, d.cfg.NomadBin, args...)
	cmd.Env = append(cmd.Environ(), "NOMAD_ADDR="+d.cfg.NomadAddr)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return out.String(), fmt.Errorf("nomad %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// poll calls f every half second until it reports done, the context ends or
// timeout passes; what names what is awaited in the progress line.
func (d *Demo) poll(ctx context.Context, what string, timeout time.Duration, f func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	started := time.Now()
	lastSaid := time.Now()
	var lastErr error
	for {
		done, err := f()
		if err == nil && done {
			return nil
		}
		lastErr = err
		if time.Since(lastSaid) > 15*time.Second {
			d.say("... still waiting for %s (%s)", what, time.Since(started).Round(time.Second))
			lastSaid = time.Now()
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return fmt.Errorf("timed out after %s waiting for %s (last error: %v)", timeout, what, lastErr)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// allocs returns the allocations of the job registered now under jobID,
// newest first.
func (d *Demo) allocs(jobID string) ([]*nomadapi.AllocationListStub, error) {
	as, _, err := d.nomad.Jobs().Allocations(jobID, true, nil)
	if err != nil {
		return nil, err
	}
	if job, _, err := d.nomad.Jobs().Info(jobID, nil); err == nil {
		as = allocs.Current(job, as)
	}
	sort.Slice(as, func(i, j int) bool { return as[i].CreateIndex > as[j].CreateIndex })
	return as, nil
}

// waitRunning waits for a job to have n running allocations and returns them.
func (d *Demo) waitRunning(ctx context.Context, jobID string, n int, timeout time.Duration) ([]*nomadapi.AllocationListStub, error) {
	var running []*nomadapi.AllocationListStub
	err := d.poll(ctx, jobID+" to run", timeout, func() (bool, error) {
		as, err := d.allocs(jobID)
		if err != nil {
			return false, err
		}
		running = running[:0]
		for _, a := range as {
			if a.ClientStatus == nomadapi.AllocClientStatusRunning {
				running = append(running, a)
			}
		}
		return len(running) >= n, nil
	})
	return running, err
}

// waitAllocStatus waits until an allocation reaches one of the statuses.
func (d *Demo) waitAllocStatus(ctx context.Context, allocID string, timeout time.Duration, statuses ...string) (*nomadapi.Allocation, error) {
	var alloc *nomadapi.Allocation
	err := d.poll(ctx, "allocation "+allocID[:8]+" to be "+strings.Join(statuses, " or "), timeout, func() (bool, error) {
		var err error
		alloc, _, err = d.nomad.Allocations().Info(allocID, nil)
		if err != nil {
			return false, err
		}
		for _, s := range statuses {
			if alloc.ClientStatus == s {
				return true, nil
			}
		}
		return false, nil
	})
	return alloc, err
}

// events returns a task's events whose type starts with prefix.
func events(alloc *nomadapi.Allocation, task, prefix string) []*nomadapi.TaskEvent {
	ts, ok := alloc.TaskStates[task]
	if !ok {
		return nil
	}
	var out []*nomadapi.TaskEvent
	for _, e := range ts.Events {
		if strings.HasPrefix(e.Type, prefix) || strings.HasPrefix(e.DisplayMessage, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// logs returns a task's stdout so far.
func (d *Demo) logs(ctx context.Context, allocID, task string) (string, error) {
	return d.cli(ctx, "alloc", "logs", allocID, task)
}

func (d *Demo) nodeName(nodeID string) string {
	n, _, err := d.nomad.Nodes().Info(nodeID, nil)
	if err != nil {
		return nodeID[:8]
	}
	return n.Name
}
