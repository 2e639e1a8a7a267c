package adversarial

// Helpers of the planner's adversarial tests (planner_test.go): planner
// processes on the host, the cluster's Consul agent, task tokens. Names
// start with "pl" so they never collide with other files of the package.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
	"github.com/caravan-nomad/caravan/progress"
)

// plProc is one planner process started by a test (harness.Planner).
type plProc struct {
	p    *harness.Planner
	url  string
	port int
}

// plOpts adjust a planner's config.
type plOpts struct {
	port   int      // 0: a free port
	policy string   // lines added to the policy block
	extra  string   // blocks added to the file
	env    []string // added to the process environment (e.g. NOMAD_TOKEN=...)
}

// plStart runs `caravan planner` as a host process (so a test can kill -9
// it) with the session TTL the tests reason about.
func plStart(t *testing.T, c *harness.C, name string) *plProc {
	t.Helper()
	return plStartWith(t, c, name, plOpts{})
}

func plStartWith(t *testing.T, c *harness.C, name string, o plOpts) *plProc {
	t.Helper()
	p := c.StartPlanner(t, name, harness.PlannerOptions{Port: o.port, ServiceID: "caravan-planner-adv-" + name,
		Policy: o.policy, Extra: o.extra, Env: o.env})
	return &plProc{p: p, url: p.URL, port: p.Port}
}

// plSessionTTL is the planners' Consul session TTL in these tests.
const plSessionTTL = harness.PlannerSessionTTL

// kill9 kills the process at once, as a crash does.
func (p *plProc) kill9() { p.p.Kill9() }

// waitLeading waits until the planner says it leads (want) or not.
func (p *plProc) waitLeading(t *testing.T, want bool, timeout time.Duration) {
	t.Helper()
	p.p.WaitLeading(t, want, timeout)
}

type plJob = harness.PlannerJob

func (p *plProc) jobs() (map[string]plJob, error) { return p.p.Jobs() }

// post sends a progress body with a bearer token; it returns the status
// and the planner's error body.
func (p *plProc) post(token, body string) (int, progress.ErrorBody, error) {
	return p.p.PostProgress(token, body)
}

// plPlannerEvents returns the planner's scaling events on a job's worker group.
func plPlannerEvents(t *testing.T, c *harness.C, job string) []nomadapi.ScalingEvent {
	t.Helper()
	return c.PlannerEvents(t, job)
}

// plRunSim submits a managed job of simulated workers that report progress
// (jobspecs/planner-train-sim.nomad.hcl).
func plRunSim(t *testing.T, c *harness.C, name string, vars ...string) string {
	t.Helper()
	return c.RunSim(t, name, vars...)
}

// plSecretsToken reads the token a task reports with from its secrets
// directory: a named planner identity's file, else the default identity's
// (progress.TokenFrom's order); "" when neither is written yet.
func plSecretsToken(secrets string) string {
	for _, name := range []string{progress.TokenFile, progress.DefaultTokenFile} {
		if b, err := os.ReadFile(filepath.Join(secrets, name)); err == nil && len(bytes.TrimSpace(b)) > 0 {
			return string(bytes.TrimSpace(b))
		}
	}
	return ""
}

// plTaskToken reads the identity Nomad gave a running task of job for its
// progress reports (the file is in the task's secrets directory on the
// client that runs it; the test runs as the same user as the clients).
func plTaskToken(t *testing.T, c *harness.C, job, task string) string {
	t.Helper()
	var token string
	harness.Eventually(t, 2*time.Minute, func() error {
		allocs, _, err := c.Nomad.Jobs().Allocations(job, false, nil)
		if err != nil {
			return err
		}
		for _, a := range allocs {
			if a.ClientStatus != "running" {
				continue
			}
			for _, cl := range c.Clients {
				if token = plSecretsToken(filepath.Join(c.Dir, cl.Name, "alloc", a.ID, task, "secrets")); token != "" {
					return nil
				}
			}
		}
		return fmt.Errorf("no running allocation of %s with a planner token yet", job)
	})
	return token
}

// plClaims decodes a JWT's payload (no verification: the test only looks).
func plClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	must.SliceLen(t, 3, parts)
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	must.NoError(t, err)
	var m map[string]any
	must.NoError(t, json.Unmarshal(b, &m))
	return m
}

// plConsulPID is the cluster's Consul agent process (scripts/cluster.sh
// writes its pid file).
func plConsulPID(t *testing.T, c *harness.C) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, "pids", "consul.pid"))
	must.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	must.NoError(t, err)
	must.NoError(t, syscall.Kill(pid, 0))
	return pid
}

// plFreezeConsul stops the Consul agent with SIGSTOP; the returned function
// (also run at cleanup) continues it. Idempotent.
func plFreezeConsul(t *testing.T, c *harness.C) (thaw func()) {
	t.Helper()
	pid := plConsulPID(t, c)
	must.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	thawed := false
	thaw = func() {
		if !thawed {
			thawed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw)
	return thaw
}

// plRestartConsulLosingState stops the Consul dev agent and starts it again
// the way scripts/cluster.sh does: a dev agent keeps its state in memory, so
// every registration, session and key is gone afterwards.
func plRestartConsulLosingState(t *testing.T, c *harness.C) {
	t.Helper()
	pid := plConsulPID(t, c)
	must.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	harness.Eventually(t, 30*time.Second, func() error {
		if syscall.Kill(pid, 0) == nil {
			return fmt.Errorf("consul (pid %d) still running", pid)
		}
		return nil
	})
	logf, err := os.OpenFile(filepath.Join(c.Dir, "logs", "consul.log"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	must.NoError(t, err)
	defer logf.Close()
	cmd := exec.Command(c.ConsulBin, "agent", "-dev",
		"-config-file="+filepath.Join(c.Dir, "config", "consul.hcl"))
	cmd.Env = append(os.Environ(), "CARAVAN_CLUSTER_MARK="+c.Dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	must.NoError(t, cmd.Start())
	must.NoError(t, os.WriteFile(filepath.Join(c.Dir, "pids", "consul.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644))
	go func() { _ = cmd.Wait() }() // reap it if it ends while the test runs
	harness.Eventually(t, time.Minute, func() error {
		leader, err := c.Consul.Status().Leader()
		if err != nil || leader == "" {
			return fmt.Errorf("consul has no leader yet: %v", err)
		}
		return nil
	})
}
