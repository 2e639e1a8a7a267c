// Package planner runs the live planner against the local cluster: real
// Consul and Nomad agents, the simulated-GPU device plugin, and managed jobs
// whose workers are raw_exec shell loops reporting progress with their Nomad
// workload identity (jobspecs/planner-train-sim.nomad.hcl).
//
//	CARAVAN_E2E=1 CARAVAN_PORT_BASE=15200 CARAVAN_CLUSTER_DIR=$PWD/build/cluster-planner \
//	  go test ./e2e/planner -v -timeout 20m
package planner

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

// instance is one planner process started by the test (harness.Planner),
// under the short names the package's tests use.
type instance struct {
	p                      *harness.Planner
	name, url, log, config string
	cmd                    *exec.Cmd
}

func wrap(p *harness.Planner) *instance {
	return &instance{p: p, name: p.Name, url: p.URL, log: p.Log, config: p.Config, cmd: p.Cmd}
}

func freePort(t *testing.T) int { return harness.FreePort(t) }

// startPlanner runs `caravan planner` as a host process (so the test can
// kill -9 it) against the cluster, with extra blocks in its config.
func startPlanner(t *testing.T, c *harness.C, name string, extra string) *instance {
	t.Helper()
	return wrap(c.StartPlanner(t, name, harness.PlannerOptions{Extra: extra}))
}

// runPlanner runs `caravan planner` with config cfg, serving on port.
func runPlanner(t *testing.T, c *harness.C, name string, port int, cfg string, env ...string) *instance {
	t.Helper()
	return wrap(c.RunPlanner(t, name, port, cfg, env...))
}

type (
	health  = harness.PlannerHealth
	jobView = harness.PlannerJob
)

func (in *instance) health() (health, error)           { return in.p.Health() }
func (in *instance) jobs() (map[string]jobView, error) { return in.p.Jobs() }

// events returns the planner's scaling events of a job's worker group.
func events(t *testing.T, c *harness.C, job string) []nomadapi.ScalingEvent {
	t.Helper()
	return c.PlannerEvents(t, job)
}

// eventCount is the count a planner scaling event set, -1 for none: its
// Count, or, on an agent that ignores a scale's index (the planner changes
// counts with registrations there), the count-less event's caravan_count.
func eventCount(ev nomadapi.ScalingEvent) int64 {
	if n, ok := submit.EventCount(&ev); ok {
		return n
	}
	return -1
}

func action(ev nomadapi.ScalingEvent) string {
	s, _ := ev.Meta["caravan_action"].(string)
	return s
}

func runSim(t *testing.T, c *harness.C, name string, vars ...string) string {
	t.Helper()
	return c.RunSim(t, name, vars...)
}

func TestPlanner(t *testing.T) {
	c := harness.Cluster(t)
	p1 := startPlanner(t, c, "one", "")
	p1.waitLeading(t)
	p2 := startPlanner(t, c, "two", "")
	harness.Eventually(t, 30*time.Second, func() error {
		h, err := p2.health()
		if err != nil {
			return err
		}
		if h.Leader || !h.Synced {
			return fmt.Errorf("planner two should follow: %+v", h)
		}
		return nil
	})

	// Unauthenticated progress is refused.
	resp, err := http.Post(p1.url+"/v1/progress", "application/json", strings.NewReader(`{"step":1,"loss":1,"samples_per_sec":1}`))
	must.NoError(t, err)
	resp.Body.Close()
	must.Eq(t, http.StatusUnauthorized, resp.StatusCode)

	// Two jobs, one GPU-sized worker each: the planner fits them and gives
	// each a second worker (4 GPUs of 4 shares: the cluster is full).
	submitted := time.Now()
	a := runSim(t, c, "sim-a", "count=1", "max_workers=2")
	b := runSim(t, c, "sim-b", "count=1", "max_workers=2")
	for _, id := range []string{a, b} {
		harness.Eventually(t, 2*time.Minute, func() error {
			for _, ev := range events(t, c, id) {
				if eventCount(ev) == 2 {
					must.StrContains(t, ev.Message, "marginal gain")
					return nil
				}
			}
			return fmt.Errorf("%s: no scale-up event yet", id)
		})
	}
	t.Logf("scale-up events for both jobs %s after submission", time.Since(submitted).Round(100*time.Millisecond))
	harness.Eventually(t, time.Minute, func() error {
		jobs, err := p1.jobs()
		if err != nil {
			return err
		}
		if j := jobs[a]; j.Model.Source != "fit" || j.Model.Step == 0 {
			return fmt.Errorf("no fitted model for %s yet: %+v", a, j)
		}
		return nil
	})

	// A user edits job a (a new version with a note) while the planner
	// manages it: the planner keeps deciding on the user's version and
	// never writes the note away.
	ja, _, err := c.Nomad.Jobs().Info(a, nil)
	must.NoError(t, err)
	staleIndex := *ja.JobModifyIndex
	ja.Meta["owner_note"] = "edited by a user"
	_, _, err = c.Nomad.Jobs().Register(ja, nil)
	must.NoError(t, err)

	// The race itself, against the real Nomad: a planner write based on the
	// version read before the user's edit is refused, in both write paths,
	// and recognised as a conflict (not retried, not overwritten).
	w := &submit.Writer{Client: c.Nomad, Logger: hclog.NewNullLogger()}
	_, err = w.Scale(context.Background(), submit.Scale{Namespace: "default", JobID: a, Group: "worker", Count: 1,
		JobModifyIndex: staleIndex, Message: "e2e: stale write"})
	must.ErrorIs(t, err, submit.ErrConflict)
	stale, err := submit.SetCounts(ja, map[string]int{"worker": 1})
	must.NoError(t, err)
	delete(stale.Meta, "owner_note")
	_, err = w.Register(context.Background(), stale, staleIndex, "e2e: stale registration")
	must.ErrorIs(t, err, submit.ErrConflict)

	// A third job whose gang minimum (3 GPUs) cannot fit next to the
	// others: it waits, then time-slicing suspends a runner for it, and
	// later resumes the suspended one with its progress intact.
	overloaded := time.Now()
	cjob := runSim(t, c, "sim-c", "count=0", "min_workers=3", "max_workers=3", "gang=true")
	var suspended string
	var stepAtSuspend int64
	harness.Eventually(t, 3*time.Minute, func() error {
		for _, id := range []string{a, b} {
			evs := events(t, c, id)
			for _, ev := range evs {
				if action(ev) == "suspend" {
					suspended = id
					return nil
				}
			}
		}
		return fmt.Errorf("no job suspended yet")
	})
	harness.Eventually(t, time.Minute, func() error {
		jobs, err := p1.jobs()
		if err != nil {
			return err
		}
		if jobs[suspended].State != "suspended" {
			return fmt.Errorf("%s is %s", suspended, jobs[suspended].State)
		}
		stepAtSuspend = jobs[suspended].Model.Step
		return nil
	})
	harness.Eventually(t, time.Minute, func() error {
		for _, ev := range events(t, c, cjob) {
			if eventCount(ev) == 3 {
				return nil
			}
		}
		return fmt.Errorf("%s not started", cjob)
	})
	t.Logf("suspended %s at step %d for %s; %s started %s after it was submitted (quantum 30s)",
		suspended, stepAtSuspend, cjob, cjob, time.Since(overloaded).Round(100*time.Millisecond))
	suspendedAt := time.Now()

	// The leader dies: the follower takes over within seconds.
	killed := time.Now()
	must.NoError(t, p1.cmd.Process.Kill())
	_ = p1.cmd.Wait()
	harness.Eventually(t, 60*time.Second, func() error {
		h, err := p2.health()
		if err != nil {
			return err
		}
		if !h.Leader {
			return fmt.Errorf("planner two not leading yet")
		}
		return nil
	})
	t.Logf("failover: planner two leads %s after planner one was killed", time.Since(killed).Round(100*time.Millisecond))

	// The new leader resumes the suspended job at a slice boundary, from
	// the step it had reached.
	harness.Eventually(t, 3*time.Minute, func() error {
		var newest *nomadapi.ScalingEvent
		for _, ev := range events(t, c, suspended) {
			if newest == nil || ev.Time > newest.Time {
				newest = &ev
			}
		}
		if newest == nil || action(*newest) != "resume" {
			return fmt.Errorf("%s not resumed yet", suspended)
		}
		return nil
	})
	t.Logf("%s resumed about %s after its suspension", suspended, time.Since(suspendedAt).Round(time.Second))
	harness.Eventually(t, time.Minute, func() error {
		jobs, err := p2.jobs()
		if err != nil {
			return err
		}
		j := jobs[suspended]
		if j.State != "running" || j.Model.Step <= stepAtSuspend {
			return fmt.Errorf("%s: %s at step %d (suspended at %d)", suspended, j.State, j.Model.Step, stepAtSuspend)
		}
		return nil
	})

	// The user's edit survived every planner write since.
	ja, _, err = c.Nomad.Jobs().Info(a, nil)
	must.NoError(t, err)
	must.Eq(t, "edited by a user", ja.Meta["owner_note"])

	// Metrics are served in Prometheus text format.
	mresp, err := http.Get(p2.url + "/v1/metrics")
	must.NoError(t, err)
	defer mresp.Body.Close()
	must.StrContains(t, mresp.Header.Get("Content-Type"), "text/plain")
}

// startLeader starts one planner and waits until it leads.
func startLeader(t *testing.T, c *harness.C, name string) *instance {
	t.Helper()
	p := startPlanner(t, c, name, "")
	p.waitLeading(t)
	return p
}

// A job whose workers keep failing with a user error (exit 1) is stopped
// instead of re-run, with an error scaling event naming the failure.
func TestPlanner_StopsRerunsOfUserErrors(t *testing.T) {
	c := harness.Cluster(t)
	p := startLeader(t, c, "failures")
	id := runSim(t, c, "sim-fail", "count=1", "max_workers=1", "fail_exit=1")
	harness.Eventually(t, 3*time.Minute, func() error {
		jobs, err := p.jobs()
		if err != nil {
			return err
		}
		if jobs[id].State != "held" {
			return fmt.Errorf("%s is %q", id, jobs[id].State)
		}
		return nil
	})
	// Two events: the count change to 0 (a count-less event with
	// caravan_count where Nomad ignores a scale's index) and a red error
	// event (Nomad takes no count with an error), both naming the failure.
	var count, red *nomadapi.ScalingEvent
	for _, ev := range events(t, c, id) {
		if action(ev) != "user-error-stop" {
			continue
		}
		if ev.Error {
			red = &ev
		} else {
			count = &ev
		}
	}
	must.NotNil(t, count)
	must.NotNil(t, red)
	must.Eq(t, int64(0), eventCount(*count))
	must.StrContains(t, red.Message, "exited with code 1")
	st, _, err := c.Nomad.Jobs().ScaleStatus(id, nil)
	must.NoError(t, err)
	must.Eq(t, 0, st.TaskGroups["worker"].Desired)
}

// A job that reaches its target loss, and whose meta allows it, is stopped.
func TestPlanner_StopsConvergedJob(t *testing.T) {
	c := harness.Cluster(t)
	p := startLeader(t, c, "converge")
	id := runSim(t, c, "sim-conv", "count=1", "max_workers=1", "b0=0.01", "target_loss=0.5", "stop_on_converge=true")
	// Once Nomad has the job stopped, the planner's view of it (read
	// after, so from the round that stopped it or a later one) is at or
	// below the target loss. A read that fails is retried.
	var seen harness.PlannerJob
	harness.Eventually(t, 3*time.Minute, func() error {
		job, _, err := c.Nomad.Jobs().Info(id, nil)
		if err != nil {
			return err
		}
		if job.Stop == nil || !*job.Stop {
			return fmt.Errorf("%s not stopped yet", id)
		}
		jobs, err := p.jobs()
		if err != nil {
			return fmt.Errorf("planner /v1/jobs: %w", err)
		}
		v, ok := jobs[id]
		switch {
		case !ok:
			return fmt.Errorf("the planner's /v1/jobs does not list %s", id)
		case v.Model.Step == 0 || v.Model.Loss > 0.5:
			return fmt.Errorf("%s stopped, but the planner's view is at step %d, loss %.4f", id, v.Model.Step, v.Model.Loss)
		}
		seen = v
		return nil
	})
	t.Logf("%s stopped at step %d, loss %.4f (target 0.5)", id, seen.Model.Step, seen.Model.Loss)
}

// Five real trainers under the checkpointing driver, one GPU each, on a
// four-GPU cluster: the fifth waits, then time-slicing suspends a runner
// (the driver checkpoints it) and starts the fifth; later the suspended one
// resumes from its checkpoint, not from step 0. Progress comes from the
// relay sidecar reading the trainer's log.
func TestPlanner_TimeSlicesRealTrainers(t *testing.T) {
	c := harness.Cluster(t)
	p := startLeader(t, c, "trainers")
	bin := filepath.Join(c.Root, "build", "caravan")
	// Fresh job IDs: the checkpoint store outlives purged jobs, and a
	// reused ID would resume an earlier run's checkpoint.
	run := time.Now().Unix() % 1000000
	var ids []string
	for i := 0; i < 5; i++ {
		count := "1"
		if i == 4 {
			count = "0"
		}
		ids = append(ids, c.RunJob(t, "jobspecs/planner-train.nomad.hcl", fmt.Sprintf("name=real-%c-%d", 'a'+i, run),
			"caravan_bin="+bin, "shares=4", "count="+count, "step_delay=10ms"))
	}
	last := ids[4]
	var suspended string
	var stepAtSuspend int64
	harness.Eventually(t, 3*time.Minute, func() error {
		jobs, err := p.jobs()
		if err != nil {
			return err
		}
		for _, id := range ids[:4] {
			if jobs[id].State == "suspended" {
				suspended, stepAtSuspend = id, jobs[id].Model.Step
				return nil
			}
		}
		return fmt.Errorf("no trainer suspended yet")
	})
	must.Positive(t, stepAtSuspend)
	harness.Eventually(t, time.Minute, func() error {
		jobs, err := p.jobs()
		if err != nil {
			return err
		}
		if jobs[last].State != "running" || jobs[last].Model.Step == 0 {
			return fmt.Errorf("%s: %s at step %d", last, jobs[last].State, jobs[last].Model.Step)
		}
		return nil
	})
	t.Logf("suspended %s at step %d; %s runs", suspended, stepAtSuspend, last)

	// Later the suspended trainer resumes from its checkpoint.
	var resumed *nomadapi.AllocationListStub
	harness.Eventually(t, 3*time.Minute, func() error {
		allocs, _, err := c.Nomad.Jobs().Allocations(suspended, false, nil)
		if err != nil {
			return err
		}
		for _, a := range allocs {
			if a.ClientStatus == "running" && a.DesiredStatus == "run" {
				resumed = a
				return nil
			}
		}
		return fmt.Errorf("%s not resumed yet", suspended)
	})
	harness.Eventually(t, time.Minute, func() error {
		logs := c.Logs(t, resumed.ID, "train", "stdout")
		if !strings.Contains(logs, "resumed step=") {
			return fmt.Errorf("no resume line yet in:\n%s", harness.Tail(logs, 5))
		}
		return nil
	})
	logs := c.Logs(t, resumed.ID, "train", "stdout")
	var resumedAt int64
	for _, l := range strings.Split(logs, "\n") {
		if strings.HasPrefix(l, "resumed step=") {
			_, _ = fmt.Sscanf(l, "resumed step=%d", &resumedAt)
		}
	}
	t.Logf("%s resumed at step %d (suspended at about %d)", suspended, resumedAt, stepAtSuspend)
	must.GreaterEq(t, stepAtSuspend-200, resumedAt) // from the checkpoint taken at suspension, not from 0

	// The policy is told the resume as a restart, the GPU-seconds held
	// before and since, and the trainer's gradient statistics (through the
	// zero-code relay).
	harness.Eventually(t, time.Minute, func() error {
		jobs, err := p.jobs()
		if err != nil {
			return err
		}
		j := jobs[suspended]
		if j.History == nil || j.History.Restarts < 1 || j.History.Attained <= 0 || j.Model.GradSqr <= 0 || j.Model.GradVar <= 0 {
			return fmt.Errorf("%s: history %+v, grad_sqr %v, grad_var %v", suspended, j.History, j.Model.GradSqr, j.Model.GradVar)
		}
		t.Logf("%s: %d restarts, %.0f GPU-seconds attained, grad_sqr %.3g, grad_var %.3g", suspended,
			j.History.Restarts, j.History.Attained, j.Model.GradSqr, j.Model.GradVar)
		return nil
	})
}

// SIGHUP reloads the config (here: into dry-run); SIGTERM stops cleanly,
// releasing the lock and deregistering from Consul.
func TestPlanner_ReloadAndCleanStop(t *testing.T) {
	c := harness.Cluster(t)
	p := startLeader(t, c, "reload")
	cfg, err := os.ReadFile(p.config)
	must.NoError(t, err)
	must.NoError(t, os.WriteFile(p.config, append(cfg, []byte("\ndry_run = true\n")...), 0o600))
	must.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	harness.Eventually(t, 30*time.Second, func() error {
		var plan struct {
			DryRun bool `json:"dry_run"`
		}
		if err := harness.GetJSON(p.url+"/v1/plan", &plan); err != nil {
			return err
		}
		if !plan.DryRun {
			return fmt.Errorf("not in dry-run yet")
		}
		return nil
	})

	must.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		must.NoError(t, err) // exit status 0
	case <-time.After(15 * time.Second):
		t.Fatal("planner did not stop within 15s of SIGTERM")
	}
	services, _, err := c.Consul.Catalog().Service("caravan-planner", "", nil)
	must.NoError(t, err)
	for _, s := range services {
		must.NotEq(t, "caravan-planner-reload", s.ServiceID)
	}
	pair, _, err := c.Consul.KV().Get("caravan/planner/leader", nil)
	must.NoError(t, err)
	if pair != nil {
		must.Eq(t, "", pair.Session) // the lock is free for the next leader
	}
}
