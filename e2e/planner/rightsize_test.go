package planner

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// TestPlanner_RightsizeApplied: a job that declares 4 GPU shares per
// worker, opts in with caravan_rightsize = "apply", and whose reports claim
// a peak of 4 GiB (SIMULATED: the raw_exec worker sends the number; the
// local cluster's simulated GPUs have 40 GiB in 4 shares of 10 GiB) is
// resized to 1 share by the planner: a new job version whose worker task
// asks for 1 share, a count-less scaling event "resize" with the measured
// numbers, and a worker at 1 share that goes on from the global step the
// old one reached (this jobspec's state file stands in for the driver's
// checkpoint: the real checkpoint round trip is the driver's e2e).
func TestPlanner_RightsizeApplied(t *testing.T) {
	c := harness.Cluster(t)
	p := startLeader(t, c, "rightsize")
	id := runSim(t, c, "sim-rightsize", "count=1", "max_workers=1", "rightsize=apply", "gpu_memory_peak_mib=4096")

	resize := waitResize(t, c, p, id, 4*time.Minute)
	// The step the old worker had reached when the planner resized it.
	before := stateStep(t, c, id)
	must.Eq[any](t, float64(4), resize.Meta["caravan_gpu_shares_from"])
	must.Eq[any](t, float64(1), resize.Meta["caravan_gpu_shares"])
	must.Eq[any](t, float64(4096), resize.Meta["caravan_gpu_memory_peak_mib"])
	must.Eq[any](t, "rightsize", resize.Meta["caravan_resize_cause"])
	must.Eq(t, int64(1), eventCount(resize))
	must.StrContains(t, resize.Message, "GPU shares per worker 4 -> 1 (right-sizing")

	// The new version's worker runs, at 1 share, from the step reached.
	worker := resizedWorker(t, c, id, 1)
	first := regexp.MustCompile(`step=(\d+) `)
	harness.Eventually(t, time.Minute, func() error {
		m := first.FindStringSubmatch(c.Logs(t, worker.ID, "train", "stdout"))
		if m == nil {
			return fmt.Errorf("the new worker %s has logged no step yet", worker.ID)
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		if n <= before {
			return fmt.Errorf("the new worker started at step %d, not after %d", n, before)
		}
		return nil
	})

	// No second resize: the next recommendation, at 1 share, is 1.
	harness.Eventually(t, 2*time.Minute, func() error {
		var v struct {
			Jobs []struct {
				ID        string `json:"id"`
				Rightsize *struct {
					Current int  `json:"current_shares"`
					Shares  int  `json:"shares"`
					Enough  bool `json:"enough_evidence"`
				} `json:"rightsize"`
			} `json:"jobs"`
		}
		if err := harness.GetJSON(p.url+"/v1/jobs", &v); err != nil {
			return err
		}
		for _, j := range v.Jobs {
			if j.ID == id && j.Rightsize != nil && j.Rightsize.Current == 1 && j.Rightsize.Enough {
				must.Eq(t, 1, j.Rightsize.Shares)
				return nil
			}
		}
		return fmt.Errorf("no evidence at 1 share yet: %+v", v.Jobs)
	})
	n := 0
	for _, ev := range events(t, c, id) {
		if action(ev) == "resize" {
			n++
		}
	}
	must.Eq(t, 1, n)
}

// waitResize waits for the planner's first "resize" scaling event on id.
func waitResize(t *testing.T, c *harness.C, p *instance, id string, within time.Duration) nomadapi.ScalingEvent {
	t.Helper()
	var resize nomadapi.ScalingEvent
	harness.Eventually(t, within, func() error {
		for _, ev := range events(t, c, id) {
			if action(ev) == "resize" {
				resize = ev
				return nil
			}
		}
		jobs, err := p.jobs()
		return fmt.Errorf("no resize event yet (job %+v, err %v)", jobs[id], err)
	})
	return resize
}

// resizedWorker checks that id's current version asks for shares GPU
// shares per worker and waits for a running worker of that version.
func resizedWorker(t *testing.T, c *harness.C, id string, shares uint64) *nomadapi.AllocationListStub {
	t.Helper()
	job, _, err := c.Nomad.Jobs().Info(id, nil)
	must.NoError(t, err)
	must.Eq(t, shares, *job.TaskGroups[0].Tasks[0].Resources.Devices[0].Count)
	var worker *nomadapi.AllocationListStub
	c.WaitAllocs(t, id, 2*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		for _, a := range as {
			if a.JobVersion == *job.Version && a.ClientStatus == "running" {
				worker = a
				return true
			}
		}
		return false
	})
	return worker
}

// stateStep is the global step in the simulated job's state file.
func stateStep(t *testing.T, c *harness.C, id string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.CheckpointDir, "default-"+id, "step"))
	must.NoError(t, err)
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	must.NoError(t, err)
	return n
}

// TestPlanner_RegrowsAfterGPUOutOfMemory: a job whose 1-share worker
// reports running out of GPU memory and exits 1 (SIMULATED: the worker
// holds fewer shares than the jobspec's oom_below_shares) is not stopped as
// a user error: the planner grows it to 2 shares, and the new worker runs
// on from the global step the old one reached.
func TestPlanner_RegrowsAfterGPUOutOfMemory(t *testing.T) {
	c := harness.Cluster(t)
	p := startLeader(t, c, "regrow")
	id := runSim(t, c, "sim-oom", "shares=1", "count=1", "max_workers=1", "oom_below_shares=2")

	resize := waitResize(t, c, p, id, 3*time.Minute)
	before := stateStep(t, c, id)
	must.Eq[any](t, "gpu-out-of-memory", resize.Meta["caravan_resize_cause"])
	must.Eq[any](t, float64(1), resize.Meta["caravan_gpu_shares_from"])
	must.Eq[any](t, float64(2), resize.Meta["caravan_gpu_shares"])
	must.StrContains(t, resize.Message, "GPU shares per worker 1 -> 2 (regrowth after running out of GPU memory")

	worker := resizedWorker(t, c, id, 2)
	// It keeps running past the point where it failed at 1 share, from
	// the step reached, and the planner counts no user error.
	harness.Eventually(t, time.Minute, func() error {
		out := c.Logs(t, worker.ID, "train", "stdout")
		steps := regexp.MustCompile(`step=(\d+) `).FindAllStringSubmatch(out, -1)
		if len(steps) < 6 {
			return fmt.Errorf("the new worker %s logged %d steps", worker.ID, len(steps))
		}
		n, _ := strconv.ParseInt(steps[0][1], 10, 64)
		if n <= before {
			return fmt.Errorf("the new worker started at step %d, not after %d", n, before)
		}
		return nil
	})
	var v struct {
		Jobs []struct {
			ID       string `json:"id"`
			State    string `json:"state"`
			Failures struct {
				User int `json:"user"`
				OOM  int `json:"gpu_out_of_memory"`
			} `json:"failures"`
		} `json:"jobs"`
	}
	must.NoError(t, harness.GetJSON(p.url+"/v1/jobs", &v))
	found := false
	for _, j := range v.Jobs {
		if j.ID == id {
			found = true
			must.Eq(t, "running", j.State)
			must.Eq(t, 0, j.Failures.User)
		}
	}
	must.True(t, found)
}
