package harness

// The e2e tests' side of internal/cluster, the cluster-driving library
// that `caravan demo` and `caravan testbed` use too: the same calls, with
// a failure failing the test.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/internal/cluster"
)

const (
	// pollEvery is how often the harness's waits read the cluster.
	pollEvery = 250 * time.Millisecond
	// cliTimeout bounds one Nomad CLI call.
	cliTimeout = 5 * time.Minute
)

// drive is the cluster-driving library on the cluster as c has it now
// (an Agent's C is a copy with its own address, clients and token).
func (c *C) drive() *cluster.Cluster {
	return &cluster.Cluster{
		Config: cluster.Config{Root: c.Root, NomadBin: c.NomadBin, NomadAddr: c.NomadAddr, ConsulAddr: c.ConsulAddr,
			Token: c.Token, CaravanBin: c.Bin, PollEvery: pollEvery},
		Nomad:  c.Nomad,
		Consul: c.Consul,
	}
}

// fatal fails t with err; a wait that ran out of time names its timeout
// and its condition's last error.
func fatal(t testing.TB, err error) {
	t.Helper()
	var te *cluster.TimeoutError
	if errors.As(err, &te) {
		t.Fatalf("harness: still failing after %s: %v", te.After, te.Last)
	}
	t.Fatalf("harness: %v", err)
}

// CLI runs the Nomad CLI against the cluster and returns its combined output.
func (c *C) CLI(t testing.TB, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	return c.drive().CLI(ctx, args...)
}

// RunJob submits a jobspec the way a user does, with `nomad job run`, and
// returns the job's ID. path is relative to the repository root; vars are
// "name=value" pairs for the jobspec's variables. The job is stopped and
// purged when the test ends.
func (c *C) RunJob(t testing.TB, path string, vars ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	id, err := c.drive().Submit(ctx, path, vars...)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.logJobState(t, id)
		}
		c.StopJob(t, id)
	})
	return id
}

// logJobState logs, for a failed test, what Nomad says of each of the
// job's allocations (every task's state and newest events) and the tail
// of the container runtimes' logs: what a CI log needs to tell a stuck
// start from a slow one.
func (c *C) logJobState(t testing.TB, jobID string) {
	t.Helper()
	stubs, err := c.JobAllocs(jobID)
	if err != nil {
		t.Logf("harness: %s's allocations: %v", jobID, err)
		return
	}
	for _, s := range stubs {
		var b strings.Builder
		fmt.Fprintf(&b, "harness: allocation %s of %s on %s: desired %s, client %s", s.ID[:8], jobID, s.NodeName, s.DesiredStatus, s.ClientStatus)
		for task, st := range s.TaskStates {
			fmt.Fprintf(&b, "\n  task %s: %s (failed %v, restarts %d)", task, st.State, st.Failed, st.Restarts)
			for _, ev := range st.Events[max(0, len(st.Events)-4):] {
				fmt.Fprintf(&b, "\n    %s %s: %s", time.Unix(0, ev.Time).UTC().Format("15:04:05.000"), ev.Type, ev.DisplayMessage)
			}
		}
		t.Log(b.String())
	}
	for _, name := range []string{"podman.log", "dockerd.log"} {
		if b, err := os.ReadFile(filepath.Join(c.Dir, "logs", name)); err == nil && len(b) > 0 {
			t.Logf("harness: %s (tail):\n%s", name, Tail(string(b), 15))
		}
	}
}

// StopJob stops a job, waits (bounded) until its allocations have stopped
// (so a checkpoint taken on stop is committed before the next test starts),
// then purges it. A stop that fails, or allocations still running a minute
// after it, fail t: they would disturb the tests that follow.
func (c *C) StopJob(t testing.TB, jobID string) {
	t.Helper()
	err := c.drive().Stop(context.Background(), jobID, time.Minute)
	switch {
	case errors.Is(err, cluster.ErrPurge):
		t.Logf("harness: %v", err)
	case err != nil:
		t.Errorf("harness: %v", err)
	}
}

// WaitAllocs polls the job's allocations until cond holds, and returns them.
func (c *C) WaitAllocs(t testing.TB, jobID string, timeout time.Duration, cond func([]*nomadapi.AllocationListStub) bool) []*nomadapi.AllocationListStub {
	t.Helper()
	as, err := c.drive().WaitAllocs(context.Background(), jobID, timeout, cond)
	if err != nil {
		fatal(t, err)
	}
	return as
}

// JobAllocs lists the allocations of the job registered now under jobID
// (cluster.Allocs: a purged job's earlier allocations are left out).
func (c *C) JobAllocs(jobID string) ([]*nomadapi.AllocationListStub, error) {
	return c.drive().Allocs(context.Background(), jobID)
}

// WaitAllocStatus polls an allocation until its client status is status.
func (c *C) WaitAllocStatus(t testing.TB, allocID, status string, timeout time.Duration) *nomadapi.Allocation {
	t.Helper()
	alloc, err := c.drive().WaitAllocStatus(context.Background(), allocID, timeout, status)
	if err != nil {
		fatal(t, err)
	}
	return alloc
}

// Logs returns a task's whole stdout or stderr log: empty while the task
// has not started (its allocation's prestart tasks still running), so a
// test polling for a line waits instead of failing on Nomad's 404.
func (c *C) Logs(t testing.TB, allocID, task, stream string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	out, err := c.drive().Logs(ctx, allocID, task, stream == "stderr")
	switch {
	case errors.Is(err, cluster.ErrNotStarted):
		t.Logf("harness: %s/%s has not started yet: no logs", allocID, task)
		return ""
	case errors.Is(err, cluster.ErrCollected):
		t.Fatalf("harness: logs of %s/%s: %v (the client garbage-collected the finished allocation: "+
			"is its disk nearly full? scripts/cluster/client.hcl sets the client's gc_* thresholds)", allocID, task, err)
	case err != nil:
		t.Fatalf("harness: logs of %s/%s: %v", allocID, task, err)
	}
	return out
}

// TaskEvents returns the events Nomad holds for a task of an allocation.
func (c *C) TaskEvents(t testing.TB, allocID, task string) []*nomadapi.TaskEvent {
	t.Helper()
	evs, err := c.drive().TaskEvents(context.Background(), allocID, task)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	return evs
}

// Eventually polls f every 250ms until it returns nil, failing the test with
// f's last error after timeout.
func Eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	if err := cluster.Poll(context.Background(), pollEvery, timeout, f); err != nil {
		fatal(t, err)
	}
}
