package planner

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// scalingJob is a one-group service job opted in to the planner, with a
// scaling block on its worker group. Its task only sleeps.
func scalingJob(id string, lo, hi int64, enabled bool, meta map[string]string) *nomadapi.Job {
	job := nomadapi.NewServiceJob(id, id, "global", 50)
	job.Datacenters = []string{"*"}
	job.Meta = map[string]string{"caravan_planner": "true", "caravan_gpu_shares": "1"}
	for k, v := range meta {
		job.Meta[k] = v
	}
	tg := nomadapi.NewTaskGroup("worker", int(lo)) // Nomad refuses a count outside the block
	tg.Scaling = &nomadapi.ScalingPolicy{Min: &lo, Max: &hi, Enabled: &enabled}
	task := nomadapi.NewTask("sleep", "caravan")
	task.Config = map[string]any{"command": "/bin/sleep", "args": []string{"600"}}
	task.Resources = &nomadapi.Resources{CPU: ptr(20), MemoryMB: ptr(32)}
	tg.AddTask(task)
	job.AddTaskGroup(tg)
	return job
}

type scalingView struct {
	State  string `json:"state"`
	Detail string `json:"detail"`
	Spec   struct {
		MinWorkers int `json:"min_workers"`
		MaxWorkers int `json:"max_workers"`
		Bounds     struct {
			Workers string `json:"workers"`
		} `json:"bounds_source"`
		Suspendable bool     `json:"suspendable"`
		Warnings    []string `json:"warnings"`
	} `json:"spec"`
}

// TestPlanner_ScalingBlockBounds: the planner takes a worker group's scaling
// block as its bounds, refuses meta bounds Nomad would refuse, and names
// unknown caravan_* keys; and Nomad itself refuses a scale outside the
// block even when the block is disabled (why meta may only narrow it).
// Dry run: nothing is written to the jobs. About 15 s.
func TestPlanner_ScalingBlockBounds(t *testing.T) {
	c := harness.Cluster(t)
	p := startPlanner(t, c, "scaling", "dry_run = true\n")
	jobs := map[string]*nomadapi.Job{
		"scaling-ok":   scalingJob("scaling-ok", 2, 3, false, map[string]string{"caravan_max_worker": "2"}),
		"scaling-over": scalingJob("scaling-over", 1, 2, true, map[string]string{"caravan_max_workers": "4"}),
	}
	for id, job := range jobs {
		_, _, err := c.Nomad.Jobs().Register(job, nil)
		must.NoError(t, err)
		t.Cleanup(func() { _, _, _ = c.Nomad.Jobs().Deregister(id, true, nil) })
	}

	// Nomad refuses counts outside a disabled block too.
	for _, n := range []int{0, 5} {
		_, _, err := c.Nomad.Jobs().Scale("scaling-ok", "worker", &n, "outside the block", false, nil, nil)
		must.Error(t, err, must.Sprintf("Nomad accepted count %d outside scaling { min = 2, max = 3 }", n))
	}

	views := map[string]scalingView{}
	harness.Eventually(t, 60*time.Second, func() error {
		var resp struct {
			Jobs []struct {
				ID string `json:"id"`
				scalingView
			} `json:"jobs"`
		}
		if err := harness.GetJSON(p.url+"/v1/jobs", &resp); err != nil {
			return err
		}
		for _, j := range resp.Jobs {
			views[j.ID] = j.scalingView
		}
		for id := range jobs {
			if _, ok := views[id]; !ok {
				return fmt.Errorf("the planner does not show %s yet", id)
			}
		}
		return nil
	})

	ok := views["scaling-ok"]
	must.NotEq(t, "invalid", ok.State, must.Sprint(ok.Detail))
	must.Eq(t, 2, ok.Spec.MinWorkers)
	must.Eq(t, 3, ok.Spec.MaxWorkers)
	must.Eq(t, "scaling", ok.Spec.Bounds.Workers)
	must.False(t, ok.Spec.Suspendable, must.Sprint("scaling min 2: Nomad refuses 0"))
	must.SliceLen(t, 1, ok.Spec.Warnings)
	must.StrContains(t, ok.Spec.Warnings[0], `did you mean "caravan_max_workers"?`)

	over := views["scaling-over"]
	must.Eq(t, "invalid", over.State)
	must.StrContains(t, over.Detail, "caravan_max_workers: 4 is above the worker group's scaling max 2")

	logs := strings.Join(strings.Fields(readFile(t, p.log)), " ")
	must.StrContains(t, logs, "job meta has keys the planner ignores")
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must.NoError(t, err)
	return string(b)
}

func ptr(v int) *int { return &v }
