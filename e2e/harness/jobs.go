package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/internal/allocs"
)

// CLI runs the Nomad CLI against the cluster and returns its combined output.
func (c *C) CLI(t testing.TB, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.NomadBin, args...)
	cmd.Dir = c.Root
	cmd.Env = append(cmd.Environ(), "NOMAD_ADDR="+c.NomadAddr, "CONSUL_HTTP_ADDR="+strings.TrimPrefix(c.ConsulAddr, "http://"))
	if c.Token != "" {
		cmd.Env = append(cmd.Env, "NOMAD_TOKEN="+c.Token)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("nomad %s: %w: %s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// RunJob submits a jobspec the way a user does, with `nomad job run`, and
// returns the job's ID. path is relative to the repository root; vars are
// "name=value" pairs for the jobspec's variables. The job is stopped and
// purged when the test ends.
func (c *C) RunJob(t testing.TB, path string, vars ...string) string {
	t.Helper()
	if !filepath.IsAbs(path) {
		path = filepath.Join(c.Root, path)
	}
	var varArgs []string
	for _, v := range vars {
		varArgs = append(varArgs, "-var", v)
	}
	// -output renders the job as JSON without submitting it: that gives the ID.
	rendered, err := c.CLI(t, append(append([]string{"job", "run", "-output"}, varArgs...), path)...)
	if err != nil {
		t.Fatalf("harness: rendering %s: %v", path, err)
	}
	var doc struct{ Job nomadapi.Job }
	if err := json.Unmarshal([]byte(rendered), &doc); err != nil || doc.Job.ID == nil {
		t.Fatalf("harness: reading the job ID of %s: %v", path, err)
	}
	id := *doc.Job.ID
	if _, err := c.CLI(t, append(append([]string{"job", "run", "-detach"}, varArgs...), path)...); err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() { c.StopJob(t, id) })
	return id
}

// StopJob stops a job, waits (bounded) until its allocations have stopped
// (so a checkpoint taken on stop is committed before the next test starts),
// then purges it. A stop that fails, or allocations still running a minute
// after it, fail t: they would disturb the tests that follow.
func (c *C) StopJob(t testing.TB, jobID string) {
	t.Helper()
	if _, _, err := c.Nomad.Jobs().Deregister(jobID, false, nil); err != nil {
		var resp nomadapi.UnexpectedResponseError
		if errors.As(err, &resp) && resp.StatusCode() == http.StatusNotFound {
			return
		}
		t.Errorf("harness: stopping %s: %v", jobID, err)
		return
	}
	deadline := time.Now().Add(time.Minute)
	for {
		allocs, _, err := c.Nomad.Jobs().Allocations(jobID, true, nil)
		live := 0
		for _, a := range allocs {
			if a.ClientStatus == nomadapi.AllocClientStatusRunning || a.ClientStatus == nomadapi.AllocClientStatusPending {
				live++
			}
		}
		if err == nil && live == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("harness: a minute after stopping %s: %d allocations still running (%s), reading them: %v",
				jobID, live, summarize(allocs), err)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if _, _, err := c.Nomad.Jobs().Deregister(jobID, true, nil); err != nil {
		t.Logf("harness: purging %s: %v", jobID, err)
	}
}

// WaitAllocs polls the job's allocations until cond holds, and returns them.
func (c *C) WaitAllocs(t testing.TB, jobID string, timeout time.Duration, cond func([]*nomadapi.AllocationListStub) bool) []*nomadapi.AllocationListStub {
	t.Helper()
	var allocs []*nomadapi.AllocationListStub
	Eventually(t, timeout, func() error {
		var err error
		allocs, err = c.JobAllocs(jobID)
		if err != nil {
			return err
		}
		if !cond(allocs) {
			return fmt.Errorf("allocations of %s: %s", jobID, summarize(allocs))
		}
		return nil
	})
	return allocs
}

// JobAllocs lists the allocations of the job registered now under jobID:
// a Nomad v1.6 agent keeps listing a purged job's allocations under its ID
// until its garbage collection, so those created before the job's current
// registration (a test that stops, purges and resubmits one job ID) are
// left out. With no job registered it lists them all.
func (c *C) JobAllocs(jobID string) ([]*nomadapi.AllocationListStub, error) {
	stubs, _, err := c.Nomad.Jobs().Allocations(jobID, true, nil)
	if err != nil {
		return nil, err
	}
	job, _, err := c.Nomad.Jobs().Info(jobID, nil)
	var resp nomadapi.UnexpectedResponseError
	if errors.As(err, &resp) && resp.StatusCode() == http.StatusNotFound {
		return stubs, nil
	}
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", jobID, err)
	}
	return allocs.Current(job, stubs), nil
}

// WaitAllocStatus polls an allocation until its client status is status.
func (c *C) WaitAllocStatus(t testing.TB, allocID, status string, timeout time.Duration) *nomadapi.Allocation {
	t.Helper()
	var alloc *nomadapi.Allocation
	Eventually(t, timeout, func() error {
		var err error
		alloc, _, err = c.Nomad.Allocations().Info(allocID, nil)
		if err != nil {
			return err
		}
		if alloc.ClientStatus != status {
			return fmt.Errorf("allocation %s is %s (want %s): %s", allocID, alloc.ClientStatus, status, taskStates(alloc))
		}
		return nil
	})
	return alloc
}

// Logs returns a task's whole stdout or stderr log: empty while the task
// has not started (its allocation's prestart tasks still running), so a
// test polling for a line waits instead of failing on Nomad's 404.
func (c *C) Logs(t testing.TB, allocID, task, stream string) string {
	t.Helper()
	args := []string{"alloc", "logs"}
	if stream == "stderr" {
		args = append(args, "-stderr")
	}
	out, err := c.CLI(t, append(args, allocID, task)...)
	if err != nil {
		if notStartedYet(err) {
			t.Logf("harness: %s/%s has not started yet: no logs", allocID, task)
			return ""
		}
		if strings.Contains(err.Error(), "not found on client") {
			t.Fatalf("harness: logs of %s/%s: %v (the client garbage-collected the finished allocation: "+
				"is its disk nearly full? scripts/cluster/client.hcl sets the client's gc_* thresholds)", allocID, task, err)
		}
		t.Fatalf("harness: logs of %s/%s: %v", allocID, task, err)
	}
	return out
}

// notStartedYet says whether `nomad alloc logs` failed only because the
// task has not started: Nomad answers 404 "task ... not started yet. No
// logs available".
func notStartedYet(err error) bool {
	return err != nil && strings.Contains(err.Error(), "not started yet. No logs available")
}

// TaskEvents returns the events Nomad holds for a task of an allocation.
func (c *C) TaskEvents(t testing.TB, allocID, task string) []*nomadapi.TaskEvent {
	t.Helper()
	alloc, _, err := c.Nomad.Allocations().Info(allocID, nil)
	if err != nil {
		t.Fatalf("harness: allocation %s: %v", allocID, err)
	}
	if ts, ok := alloc.TaskStates[task]; ok {
		return ts.Events
	}
	return nil
}

// Eventually polls f every 250ms until it returns nil, failing the test with
// f's last error after timeout.
func Eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("harness: still failing after %s: %v", timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func summarize(allocs []*nomadapi.AllocationListStub) string {
	if len(allocs) == 0 {
		return "none"
	}
	var parts []string
	for _, a := range allocs {
		parts = append(parts, fmt.Sprintf("%s on %s: %s/%s", a.ID[:8], a.NodeName, a.DesiredStatus, a.ClientStatus))
	}
	return strings.Join(parts, "; ")
}

func taskStates(a *nomadapi.Allocation) string {
	var parts []string
	for name, ts := range a.TaskStates {
		last := ""
		if n := len(ts.Events); n > 0 {
			last = ts.Events[n-1].Type + ": " + ts.Events[n-1].DisplayMessage
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", name, ts.State, last))
	}
	return strings.Join(parts, "; ")
}
