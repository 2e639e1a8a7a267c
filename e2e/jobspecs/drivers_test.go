package jobspecs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/jobspec2"
	"github.com/shoenig/test/must"
)

// driverValues matches the validation of a jobspec's driver variable: the
// Nomad task drivers it can run its training tasks under.
var driverValues = regexp.MustCompile(`contains\(\[([^\]]*)\], var\.driver\)`)

// parseJobspec parses a jobspec as `nomad job run` does (Nomad's jobspec2),
// with -var flags.
func parseJobspec(path string, vars ...string) (*nomadapi.Job, error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return jobspec2.ParseWithConfig(&jobspec2.ParseConfig{
		Path: path, Body: body, ArgVars: vars, AllowFS: true, Strict: true,
	})
}

// drivers returns the values a shipped jobspec's driver variable allows,
// or nil when it has none.
func drivers(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	must.NoError(t, err)
	if !strings.Contains(string(b), `variable "driver" {`) {
		return nil
	}
	m := driverValues.FindStringSubmatch(string(b))
	must.NotNil(t, m, must.Sprintf("%s: variable driver has no validation listing its values", path))
	var values []string
	for _, v := range strings.Split(m[1], ",") {
		values = append(values, strings.Trim(strings.TrimSpace(v), `"`))
	}
	return values
}

// checkpointOf returns a caravan task config's checkpoint block or map
// (jobspec2 hands both over as a list of one map), nil when it has none.
func checkpointOf(task *nomadapi.Task) map[string]any {
	switch c := task.Config["checkpoint"].(type) {
	case map[string]any:
		return c
	case []map[string]any:
		if len(c) == 1 {
			return c[0]
		}
	case []any:
		if len(c) == 1 {
			m, _ := c[0].(map[string]any)
			return m
		}
	}
	return nil
}

// TestJobspecs_OneFileEveryDriver: each shipped jobspec with a driver
// variable (one file per job, in place of a copy per driver) parses under
// every driver it allows, refuses any other naming the variable, and
// checkpoints under each: under "caravan" the training tasks carry the
// driver's own checkpoint block and no role task exists; under a container
// driver every caravan task is a checkpoint role task of a container task
// of its group, with a restore and a commit in the job. The podman job is
// the docker job but for its container tasks' driver (the property
// TestJobspecs_PodmanMirrorsDocker kept between two files). Only parsing is
// checked here: the docker jobs run in e2e/containers, e2e/planner and
// TestJobspecs_RunOnSnippetClient; the podman driver plugin is not built or
// run here (README.md). Needs no cluster.
func TestJobspecs_OneFileEveryDriver(t *testing.T) {
	files, err := filepath.Glob("../../jobspecs/*.nomad.hcl")
	must.NoError(t, err)
	merged := 0
	for _, f := range files {
		values := drivers(t, f)
		if values == nil {
			continue
		}
		merged++
		t.Run(filepath.Base(f), func(t *testing.T) {
			must.SliceContains(t, values, "docker")
			jobs := map[string]*nomadapi.Job{}
			for _, d := range values {
				job, err := parseJobspec(f, "driver="+d)
				must.NoError(t, err, must.Sprintf("driver=%s", d))
				checkDriver(t, job, d)
				jobs[d] = job
			}
			if podman, ok := jobs["podman"]; ok {
				for _, tg := range podman.TaskGroups {
					for _, task := range tg.Tasks {
						if task.Driver == "podman" {
							task.Driver = "docker"
						}
					}
				}
				must.Eq(t, jobs["docker"], podman, must.Sprint("the podman job differs from the docker job in more than its drivers"))
			}
			_, err := parseJobspec(f, "driver=lxc")
			must.ErrorContains(t, err, "The driver must be")
		})
	}
	must.Positive(t, merged)
}

// checkDriver checks one job parsed with driver d: its tasks run under d or
// are caravan's, and its checkpointing is the one d needs.
func checkDriver(t *testing.T, job *nomadapi.Job, d string) {
	t.Helper()
	var under, roles []string
	driverCheckpoints := 0
	for _, tg := range job.TaskGroups {
		drivers := map[string]string{}
		for _, task := range tg.Tasks {
			drivers[task.Name] = task.Driver
		}
		for _, task := range tg.Tasks {
			where := *tg.Name + "/" + task.Name
			ckpt := checkpointOf(task)
			switch {
			case task.Driver == d && d != "caravan":
				under = append(under, where)
				must.Nil(t, ckpt, must.Sprintf("driver=%s: container task %s has a caravan checkpoint config", d, where))
			case task.Driver == "caravan" && d != "caravan":
				must.NotNil(t, ckpt, must.Sprintf("driver=%s: caravan task %s is no checkpoint role task", d, where))
				role, _ := ckpt["role"].(string)
				roles = append(roles, role)
				target, _ := ckpt["task"].(string)
				must.Eq(t, d, drivers[target], must.Sprintf("driver=%s: role task %s checkpoints %q, no %s task of its group", d, where, target, d))
			case task.Driver == "caravan":
				under = append(under, where)
				if ckpt != nil {
					_, isRole := ckpt["role"]
					must.False(t, isRole, must.Sprintf("driver=caravan: %s is a checkpoint role task", where))
					driverCheckpoints++
				}
			default:
				t.Fatalf("driver=%s: task %s runs under %q", d, where, task.Driver)
			}
		}
	}
	must.SliceNotEmpty(t, under, must.Sprintf("driver=%s: no task runs under it", d))
	if d == "caravan" {
		must.Positive(t, driverCheckpoints, must.Sprint("driver=caravan: no task has a checkpoint block"))
		return
	}
	must.True(t, slices.Contains(roles, "restore") && slices.Contains(roles, "commit"),
		must.Sprintf("driver=%s: role tasks %v lack a restore or a commit", d, roles))
}
