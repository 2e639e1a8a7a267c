package planner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// consulACLAgent starts a Consul dev agent with ACLs on (default deny) on
// CARAVAN_PORT_BASE+90..95 (past the standalone agents' +60..+82), and
// returns its HTTP address and management token.
func consulACLAgent(t *testing.T, c *harness.C) (addr, mgmt string) {
	t.Helper()
	base := harness.DefaultPortBase
	if v := os.Getenv("CARAVAN_PORT_BASE"); v != "" {
		base, _ = strconv.Atoi(v)
	}
	p := base + 90
	mgmt = "8e6b1f44-0b6a-4c7e-9b61-7d1c5e0f2a11"
	dir := t.TempDir()
	cfg := fmt.Sprintf(`node_name = "caravan-consul-acl"
datacenter = "dc1"
bind_addr = "127.0.0.1"
client_addr = "127.0.0.1"
advertise_addr = "127.0.0.1"
disable_update_check = true
ports {
  http = %d
  dns = %d
  serf_lan = %d
  serf_wan = %d
  server = %d
  grpc = %d
  grpc_tls = -1
}
acl {
  enabled = true
  default_policy = "deny"
  tokens {
    initial_management = %q
    agent = %q
  }
}
`, p, p+1, p+2, p+3, p+4, p+5, mgmt, mgmt)
	path := filepath.Join(dir, "consul.hcl")
	must.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	logFile, err := os.Create(filepath.Join(dir, "consul.log"))
	must.NoError(t, err)
	cmd := exec.Command(c.ConsulBin, "agent", "-dev", "-config-file="+path)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "CARAVAN_CLUSTER_MARK="+c.Dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	must.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logFile.Close()
	})
	addr = fmt.Sprintf("127.0.0.1:%d", p)
	harness.Eventually(t, time.Minute, func() error {
		_, err := consulCLI(c, addr, mgmt, "operator", "raft", "list-peers")
		return err
	})
	return addr, mgmt
}

func consulCLI(c *harness.C, addr, token string, args ...string) (string, error) {
	cmd := exec.Command(c.ConsulBin, args...)
	cmd.Dir = c.Root
	cmd.Env = append(os.Environ(), "CONSUL_HTTP_ADDR="+addr, "CONSUL_HTTP_TOKEN="+token)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("consul %v: %w: %s", args, err, out.String())
	}
	return out.String(), nil
}

// TestPlanner_ConsulACL runs the planner against a Consul with ACLs on
// (default deny) with a token of jobspecs/acl/planner-consul.policy.hcl
// only: it registers its service with its check, creates its session and
// takes the leader lock. A token that may only read nodes is refused, and
// that planner does not lead.
func TestPlanner_ConsulACL(t *testing.T) {
	c := harness.Cluster(t)
	addr, mgmt := consulACLAgent(t, c)
	_, err := consulCLI(c, addr, mgmt, "acl", "policy", "create", "-name", "caravan-planner",
		"-rules", "@"+filepath.Join(c.Root, "jobspecs", "acl", "planner-consul.policy.hcl"))
	must.NoError(t, err)
	out, err := consulCLI(c, addr, mgmt, "acl", "token", "create", "-description", "caravan planner",
		"-policy-name", "caravan-planner", "-format", "json")
	must.NoError(t, err)
	var tok struct{ SecretID string }
	must.NoError(t, json.Unmarshal([]byte(out), &tok))
	_, err = consulCLI(c, addr, mgmt, "acl", "policy", "create", "-name", "read-nodes", "-rules", `node_prefix "" { policy = "read" }`)
	must.NoError(t, err)
	out, err = consulCLI(c, addr, mgmt, "acl", "token", "create", "-description", "read nodes only",
		"-policy-name", "read-nodes", "-format", "json")
	must.NoError(t, err)
	var bare struct{ SecretID string }
	must.NoError(t, json.Unmarshal([]byte(out), &bare))

	start := func(name, token string) *instance {
		port := freePort(t)
		return runPlanner(t, c, name, port, fmt.Sprintf(`
log_level = "debug"
bind_addr = "127.0.0.1"
port      = %d
dry_run   = true # leadership is the point; write nothing
nomad {
  address = %q
}
consul {
  address        = %q
  token          = %q
  service_id     = "caravan-planner-%s"
  check_interval = "1s"
  session_ttl    = "10s"
}
policy {
  interval = "3s"
}
capacity {
  device = "caravan/gpushare"
}
`, port, c.NomadAddr, addr, token, name))
	}
	bareP := start("consul-bare", bare.SecretID)
	p := start("consul-acl", tok.SecretID)
	harness.Eventually(t, time.Minute, func() error {
		h, err := p.health()
		if err != nil {
			return err
		}
		if !h.Leader {
			return fmt.Errorf("planner not leading yet: %+v", h)
		}
		return nil
	})
	out, err = consulCLI(c, addr, mgmt, "catalog", "services")
	must.NoError(t, err)
	must.StrContains(t, out, "caravan-planner")
	harness.Eventually(t, 30*time.Second, func() error {
		b, err := os.ReadFile(bareP.log)
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte("Permission denied")) {
			return fmt.Errorf("the read-nodes planner logged no refusal yet")
		}
		return nil
	})
	h, err := bareP.health()
	must.NoError(t, err)
	must.False(t, h.Leader, must.Sprint("a token without the policy led"))
}
