package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/internal/allocs"
)

// Allocs lists the allocations of the job registered now under jobID,
// the newest first (as Nomad's API client sorts them): a Nomad v1.6 agent keeps listing a purged job's
// allocations under its ID until its garbage collection, so those created
// before the job's current registration (a job stopped, purged and
// submitted again under its ID) are left out. With no job registered it
// lists them all.
func (c *Cluster) Allocs(ctx context.Context, jobID string) ([]*nomadapi.AllocationListStub, error) {
	q := (&nomadapi.QueryOptions{}).WithContext(ctx)
	stubs, _, err := c.Nomad.Jobs().Allocations(jobID, true, q)
	if err != nil {
		return nil, err
	}
	job, _, err := c.Nomad.Jobs().Info(jobID, q)
	if notFound(err) {
		return stubs, nil
	}
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", jobID, err)
	}
	return allocs.Current(job, stubs), nil
}

// WaitAllocs waits until cond holds of the job's allocations (Allocs) and
// returns them.
func (c *Cluster) WaitAllocs(ctx context.Context, jobID string, timeout time.Duration,
	cond func([]*nomadapi.AllocationListStub) bool) ([]*nomadapi.AllocationListStub, error) {
	var as []*nomadapi.AllocationListStub
	err := c.Wait(ctx, "the allocations of "+jobID, timeout, func() (bool, error) {
		var err error
		if as, err = c.Allocs(ctx, jobID); err != nil {
			return false, err
		}
		if !cond(as) {
			return false, fmt.Errorf("allocations of %s: %s", jobID, Summarize(as))
		}
		return true, nil
	})
	return as, err
}

// WaitAllocStatus waits until an allocation's client status is one of
// statuses, and returns the allocation.
func (c *Cluster) WaitAllocStatus(ctx context.Context, allocID string, timeout time.Duration, statuses ...string) (*nomadapi.Allocation, error) {
	var alloc *nomadapi.Allocation
	want := strings.Join(statuses, " or ")
	err := c.Wait(ctx, "allocation "+short(allocID)+" to be "+want, timeout, func() (bool, error) {
		var err error
		if alloc, _, err = c.Nomad.Allocations().Info(allocID, (&nomadapi.QueryOptions{}).WithContext(ctx)); err != nil {
			return false, err
		}
		for _, s := range statuses {
			if alloc.ClientStatus == s {
				return true, nil
			}
		}
		return false, fmt.Errorf("allocation %s is %s (want %s): %s", allocID, alloc.ClientStatus, want, TaskStates(alloc))
	})
	return alloc, err
}

// TaskEvents returns the events Nomad holds for a task of an allocation.
func (c *Cluster) TaskEvents(ctx context.Context, allocID, task string) ([]*nomadapi.TaskEvent, error) {
	alloc, _, err := c.Nomad.Allocations().Info(allocID, (&nomadapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("allocation %s: %w", allocID, err)
	}
	if ts, ok := alloc.TaskStates[task]; ok {
		return ts.Events, nil
	}
	return nil, nil
}

// Events returns a task's events whose type or message starts with prefix.
func Events(alloc *nomadapi.Allocation, task, prefix string) []*nomadapi.TaskEvent {
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

// Live are the allocations that run or are pending.
func Live(as []*nomadapi.AllocationListStub) []*nomadapi.AllocationListStub {
	var out []*nomadapi.AllocationListStub
	for _, a := range as {
		if a.ClientStatus == nomadapi.AllocClientStatusRunning || a.ClientStatus == nomadapi.AllocClientStatusPending {
			out = append(out, a)
		}
	}
	return out
}

// NodeName is a node's name, or its short ID when Nomad does not answer.
func (c *Cluster) NodeName(ctx context.Context, nodeID string) string {
	n, _, err := c.Nomad.Nodes().Info(nodeID, (&nomadapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return short(nodeID)
	}
	return n.Name
}

// Summarize is one line on allocations: ID, node, desired/client status.
func Summarize(as []*nomadapi.AllocationListStub) string {
	if len(as) == 0 {
		return "none"
	}
	var parts []string
	for _, a := range as {
		parts = append(parts, fmt.Sprintf("%s on %s: %s/%s", short(a.ID), a.NodeName, a.DesiredStatus, a.ClientStatus))
	}
	return strings.Join(parts, "; ")
}

// TaskStates is one line on an allocation's tasks: state and last event.
func TaskStates(a *nomadapi.Allocation) string {
	var parts []string
	for name, ts := range a.TaskStates {
		last := ""
		if n := len(ts.Events); n > 0 {
			last = ts.Events[n-1].Type + ": " + ts.Events[n-1].DisplayMessage
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", name, ts.State, last))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// short is an ID's first 8 characters, as Nomad's CLI shows it.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// WaitRunning waits until at least n allocations of the job run, and
// returns the running ones, the newest first.
func (c *Cluster) WaitRunning(ctx context.Context, jobID string, n int, timeout time.Duration) ([]*nomadapi.AllocationListStub, error) {
	as, err := c.WaitAllocs(ctx, jobID, timeout, func(as []*nomadapi.AllocationListStub) bool {
		return len(Running(as)) >= n
	})
	return Running(as), err
}

// Running are the allocations whose client status is running.
func Running(as []*nomadapi.AllocationListStub) []*nomadapi.AllocationListStub {
	var out []*nomadapi.AllocationListStub
	for _, a := range as {
		if a.ClientStatus == nomadapi.AllocClientStatusRunning {
			out = append(out, a)
		}
	}
	return out
}
