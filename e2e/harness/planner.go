package harness

// The planner client of the e2e tests (e2e/planner, e2e/adversarial):
// `caravan planner` as a host process a test can kill -9, its HTTP API,
// and the jobs it manages.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/progress"
)

// PlannerSessionTTL is the Consul session TTL of StartPlanner's planners.
const PlannerSessionTTL = 10 * time.Second

// Planner is one `caravan planner` process a test started.
type Planner struct {
	// Name names it in the test; URL is its HTTP address; Log its log
	// file; Config its config file.
	Name, URL, Log, Config string
	Port                   int
	Cmd                    *exec.Cmd
	logFile                *os.File
}

// PlannerOptions adjust StartPlanner's config.
type PlannerOptions struct {
	Port      int      // 0: a free port
	ServiceID string   // Consul service ID; "": caravan-planner-NAME
	Policy    string   // lines added to the policy block
	Extra     string   // blocks added to the file
	Env       []string // added to the process environment (e.g. NOMAD_TOKEN=...)
}

// FreePort is a TCP port free on 127.0.0.1 now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("harness: a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartPlanner runs `caravan planner` against the cluster as a host
// process (so a test can kill -9 it): policy optimus on 3 s rounds, a 10 s
// cooldown and a 10 s session TTL, with o's additions.
func (c *C) StartPlanner(t testing.TB, name string, o PlannerOptions) *Planner {
	t.Helper()
	if o.Port == 0 {
		o.Port = FreePort(t)
	}
	if o.ServiceID == "" {
		o.ServiceID = "caravan-planner-" + name
	}
	cfg := fmt.Sprintf(`
log_level = "debug"
bind_addr = "127.0.0.1"
port      = %d
nomad {
  address       = %q
  blocking_wait = "30s"
}
consul {
  address        = %q
  service_id     = %q
  check_interval = "1s"
  session_ttl    = "%s"
}
policy {
  name            = "optimus"
  interval        = "3s"
  cooldown        = "10s"
  restart_cost    = "5s"
  suspend_quantum = "30s"
  %s
}
capacity {
  device = "caravan/gpushare"
}
%s
`, o.Port, c.NomadAddr, strings.TrimPrefix(c.ConsulAddr, "http://"), o.ServiceID, PlannerSessionTTL, o.Policy, o.Extra)
	return c.RunPlanner(t, name, o.Port, cfg, o.Env...)
}

// RunPlanner runs `caravan planner` (build/caravan) with config cfg,
// serving on port, and env added to its environment. It is stopped when
// the test ends; a failed test logs its log's tail.
func (c *C) RunPlanner(t testing.TB, name string, port int, cfg string, env ...string) *Planner {
	t.Helper()
	dir := t.TempDir()
	p := &Planner{Name: name, URL: fmt.Sprintf("http://127.0.0.1:%d", port), Port: port,
		Config: filepath.Join(dir, "planner.hcl"), Log: filepath.Join(dir, "planner.log")}
	if err := os.WriteFile(p.Config, []byte(cfg), 0o600); err != nil {
		t.Fatalf("harness: %v", err)
	}
	var err error
	if p.logFile, err = os.Create(p.Log); err != nil {
		t.Fatalf("harness: %v", err)
	}
	p.Cmd = exec.Command(filepath.Join(c.Root, "build", "caravan"), "planner", "-config", p.Config)
	p.Cmd.Stdout, p.Cmd.Stderr = p.logFile, p.logFile
	p.Cmd.Env = append(append(os.Environ(), "NOMAD_ADDR="+c.NomadAddr), env...)
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("harness: starting planner %s: %v", name, err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			b, _ := os.ReadFile(p.Log)
			t.Logf("planner %s log (tail):\n%s", name, Tail(string(b), 80))
		}
	})
	return p
}

// Stop ends the process (SIGTERM, then SIGKILL after 10 s); idempotent.
func (p *Planner) Stop() {
	StopProcess(p.Cmd, syscall.SIGTERM, 10*time.Second)
	p.logFile.Close()
}

// Kill9 kills the process at once, as a crash does.
func (p *Planner) Kill9() {
	_ = p.Cmd.Process.Kill()
	_ = p.Cmd.Wait()
}

// PlannerHealth is the planner's /v1/health.
type PlannerHealth struct {
	Status string `json:"status"`
	Leader bool   `json:"leader"`
	Synced bool   `json:"nomad_synced"`
}

// Health reads the planner's /v1/health.
func (p *Planner) Health() (PlannerHealth, error) {
	var h PlannerHealth
	err := GetJSON(p.URL+"/v1/health", &h)
	return h, err
}

// WaitLeading waits until the planner says it leads (want) or not, and
// has synced with Nomad.
func (p *Planner) WaitLeading(t testing.TB, want bool, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, func() error {
		h, err := p.Health()
		if err != nil {
			return err
		}
		if h.Leader != want || !h.Synced {
			return fmt.Errorf("planner %s: leader=%v synced=%v, want leader=%v", p.Name, h.Leader, h.Synced, want)
		}
		return nil
	})
}

// PlannerJob is a job as the planner's /v1/jobs shows it.
type PlannerJob struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Workers int    `json:"workers"`
	Model   struct {
		Step           int64   `json:"step"`
		Loss           float64 `json:"loss"`
		StepsPerSec    float64 `json:"steps_per_sec"`
		RemainingSteps float64 `json:"remaining_steps"`
		Source         string  `json:"remaining_source"`
		GradSqr        float64 `json:"grad_sqr"`
		GradVar        float64 `json:"grad_var"`
	} `json:"model"`
	History *struct {
		Attained float64 `json:"attained_gpu_seconds"`
		Restarts int     `json:"restarts"`
	} `json:"history"`
	RenderError string `json:"render_error"`
}

// Jobs reads the planner's /v1/jobs, by job ID.
func (p *Planner) Jobs() (map[string]PlannerJob, error) {
	var resp struct {
		Jobs []PlannerJob `json:"jobs"`
	}
	if err := GetJSON(p.URL+"/v1/jobs", &resp); err != nil {
		return nil, err
	}
	out := map[string]PlannerJob{}
	for _, j := range resp.Jobs {
		out[j.ID] = j
	}
	return out, nil
}

// PostProgress sends a progress body to the planner with a bearer token;
// it returns the status and the planner's error body.
func (p *Planner) PostProgress(token, body string) (int, progress.ErrorBody, error) {
	req, err := http.NewRequest(http.MethodPost, p.URL+progress.Path, strings.NewReader(body))
	if err != nil {
		return 0, progress.ErrorBody{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, progress.ErrorBody{}, err
	}
	defer resp.Body.Close()
	var eb progress.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	return resp.StatusCode, eb, nil
}

// PlannerEvents returns the planner's scaling events on a job's worker
// group.
func (c *C) PlannerEvents(t testing.TB, job string) []nomadapi.ScalingEvent {
	t.Helper()
	st, _, err := c.Nomad.Jobs().ScaleStatus(job, nil)
	if err != nil {
		t.Fatalf("harness: scale status of %s: %v", job, err)
	}
	var out []nomadapi.ScalingEvent
	for _, ev := range st.TaskGroups["worker"].Events {
		if strings.HasPrefix(ev.Message, "caravan planner:") {
			out = append(out, ev)
		}
	}
	return out
}

// RunSim submits a managed job of simulated workers that report progress
// (jobspecs/planner-train-sim.nomad.hcl, 4 shares a worker) with vars,
// after removing the shared step file an earlier job of its name left.
func (c *C) RunSim(t testing.TB, name string, vars ...string) string {
	t.Helper()
	bin := filepath.Join(c.Root, "build", "caravan")
	base := []string{"name=" + name, "caravan_bin=" + bin, "state_dir=" + c.CheckpointDir, "shares=4"}
	_ = os.RemoveAll(filepath.Join(c.CheckpointDir, "default-"+name))
	return c.RunJob(t, "jobspecs/planner-train-sim.nomad.hcl", append(base, vars...)...)
}
