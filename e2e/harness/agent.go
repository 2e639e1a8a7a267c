package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// Agent is a standalone single-node Nomad agent (server and client in one
// process) a test starts beside the shared cluster, from config files of
// its own: for configurations the shared cluster cannot have (the shipped
// client snippet, ACLs). It uses the cluster's Consul without advertising
// itself there, so the two Nomad clusters never meet.
type Agent struct {
	Name string
	// Dir holds its plugin_dir (plugins/, with caravan and caravan-gpu),
	// data_dir (data/), checkpoint store (checkpoints/) and config.
	Dir string
	// HTTPPort is its HTTP API port: CARAVAN_PORT_BASE + 60 + 5*slot.
	HTTPPort int
	// C drives it with the harness's helpers (RunJob, WaitAllocs, ...).
	C *C

	cluster *C
	dynMin  int
	cmd     *exec.Cmd
	log     string
}

// NewAgent prepares agent `name` in port slot `slot` (0..4): its directory
// and plugins. Start it with Start.
func NewAgent(t *testing.T, c *C, name string, slot int) *Agent {
	t.Helper()
	base := DefaultPortBase
	if v := os.Getenv("CARAVAN_PORT_BASE"); v != "" {
		base, _ = strconv.Atoi(v)
	}
	dir := filepath.Join(c.Dir, "agents", name)
	_ = os.RemoveAll(dir)
	for _, d := range []string{"plugins", "data", "checkpoints"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatalf("harness: %v", err)
		}
	}
	for _, p := range []string{"caravan", "caravan-gpu"} {
		copyFile(t, filepath.Join(c.Root, "build", "caravan"), filepath.Join(dir, "plugins", p))
	}
	a := &Agent{Name: name, Dir: dir, HTTPPort: base + 60 + 5*slot, cluster: c,
		dynMin: dynamicPortsMin(base, slot)}
	ac := *c
	ac.NomadAddr = fmt.Sprintf("http://127.0.0.1:%d", a.HTTPPort)
	ac.CheckpointDir = filepath.Join(dir, "checkpoints")
	ac.Clients = []Client{{Name: name, HTTPAddr: ac.NomadAddr}}
	a.C = &ac
	return a
}

// dynamicPortsMin is the first of the agent's 8 dynamic ports: above the
// kernel's ephemeral range (32768-60999) and below cluster.sh's bases' reach,
// distinct per hundred of CARAVAN_PORT_BASE and per slot.
func dynamicPortsMin(base, slot int) int {
	return 61000 + ((base/100)%100)*40 + slot*8
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatalf("harness: %v", err)
	}
	if err := out.Close(); err != nil {
		t.Fatalf("harness: %v", err)
	}
}

// baseConfig is what every standalone agent needs to live beside the
// shared cluster: loopback ports of its own, its own cgroup parent and
// dynamic port range, a server in the same process, and the shared Consul
// for templates only.
func (a *Agent) baseConfig() string {
	return fmt.Sprintf(`name                 = %[1]q
region               = "global"
datacenter           = "dc1"
bind_addr            = "127.0.0.1"
disable_update_check = true
log_level            = "INFO"

ports {
  http = %[2]d
  rpc  = %[3]d
  serf = %[4]d
}

advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}

server {
  enabled          = true
  bootstrap_expect = 1
}

client {
  network_interface = "lo"
  cgroup_parent     = "caravan-agent-%[2]d"
  min_dynamic_port  = %[5]d
  max_dynamic_port  = %[6]d

  # Keep finished allocations and their logs on a nearly full disk, as the
  # cluster's clients do (scripts/cluster/client.hcl).
  gc_disk_usage_threshold  = 99
  gc_inode_usage_threshold = 99
  gc_max_allocs            = 500

  # Docker stays allowed: an agent whose config has a plugin "docker"
  # block (the client snippet's) reaches the cluster's dockerd; without one
  # the driver finds no daemon at its default socket and stays undetected.
  options {
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"
    "driver.denylist"      = "qemu,java"
  }
}

consul {
  address          = %[7]q
  auto_advertise   = false
  server_auto_join = false
  client_auto_join = false
}
`, a.Name, a.HTTPPort, a.HTTPPort+1, a.HTTPPort+2, a.dynMin, a.dynMin+7, strings.TrimPrefix(a.cluster.ConsulAddr, "http://"))
}

// Start runs the agent with the base config followed by configs (file
// contents, later ones overriding earlier ones, as nomad agent -config
// merges them), and waits for its node to be ready. It is stopped, and
// every process it started killed, when the test ends.
func (a *Agent) Start(t *testing.T, configs ...string) {
	t.Helper()
	args := []string{"agent"}
	for i, cfg := range append([]string{a.baseConfig()}, configs...) {
		p := filepath.Join(a.Dir, fmt.Sprintf("config-%d.hcl", i))
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatalf("harness: %v", err)
		}
		args = append(args, "-config="+p)
	}
	a.log = filepath.Join(a.Dir, "agent.log")
	logFile, err := os.Create(a.log)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	a.cmd = exec.Command(a.C.NomadBin, args...)
	a.cmd.Stdout, a.cmd.Stderr = logFile, logFile
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// The cluster's mark lets `cluster.sh down` clean up after a crashed
	// test; NOMAD_ADDR is the driver's default agent address.
	a.cmd.Env = append(os.Environ(), "CARAVAN_CLUSTER_MARK="+a.cluster.Dir, "CARAVAN_AGENT_MARK="+a.Dir,
		"NOMAD_ADDR="+a.C.NomadAddr)
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("harness: starting agent %s: %v", a.Name, err)
	}
	t.Cleanup(func() {
		a.stop()
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(a.log)
			t.Logf("agent %s log (tail):\n%s", a.Name, Tail(string(b), 60))
		}
	})
	a.C.Nomad, err = nomadapi.NewClient(&nomadapi.Config{Address: a.C.NomadAddr, SecretID: a.C.Token})
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
}

// WaitNode waits until the agent's node is ready (with token, once ACLs are
// bootstrapped) and records its ID.
func (a *Agent) WaitNode(t *testing.T, timeout time.Duration) *nomadapi.Node {
	t.Helper()
	var node *nomadapi.Node
	Eventually(t, timeout, func() error {
		nodes, _, err := a.C.Nomad.Nodes().List(nil)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.Name == a.Name && n.Status == "ready" {
				node, _, err = a.C.Nomad.Nodes().Info(n.ID, nil)
				return err
			}
		}
		return fmt.Errorf("node %s not ready", a.Name)
	})
	a.C.Clients[0].NodeID = node.ID
	return node
}

// SetToken makes the agent's helpers (API client and CLI) use token.
func (a *Agent) SetToken(t *testing.T, token string) {
	t.Helper()
	a.C.Token = token
	a.C.Nomad.SetSecretID(token)
}

// stop interrupts the agent (bounded), then kills whatever it started
// that is still alive (executors, tasks, plugins).
func (a *Agent) stop() {
	StopProcess(a.cmd, syscall.SIGINT, 30*time.Second)
	mark := []byte("CARAVAN_AGENT_MARK=" + a.Dir + "\x00")
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		env, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(env, mark) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	unmountUnder(a.Dir)
}

// unmountUnder detaches every mount below dir, deepest first: a task's
// secrets and private tmpfs outlive an agent that was stopped before it
// destroyed the allocation, and would pin the directory (EBUSY on removal).
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			points = append(points, f[1])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// PluginConfig is client configuration with raw_exec on, plugin_dir and
// data_dir in the agent's directory, and the caravan plugins' config blocks
// set to deviceConfig and driverConfig (HCL bodies, without `config {}`).
func (a *Agent) PluginConfig(deviceConfig, driverConfig string) string {
	return fmt.Sprintf(`data_dir   = %q
plugin_dir = %q

client {
  enabled = true
}

plugin "raw_exec" {
  config {
    enabled = true
  }
}

plugin "caravan-gpu" {
  args = ["device"]
  config {
%s
  }
}

plugin "caravan" {
  args = ["driver"]
  config {
%s
  }
}
`, filepath.Join(a.Dir, "data"), filepath.Join(a.Dir, "plugins"), deviceConfig, driverConfig)
}

// OneSimulatedGPU is a device plugin config body with one simulated GPU of
// four shares, for agents whose tests are not about GPUs.
const OneSimulatedGPU = `backend = "simulated"
simulated {
  gpu {
    model      = "NVIDIA A100-SXM4-40GB"
    memory_mib = 40960
  }
}`

// NewACLAgent starts a standalone agent (NewAgent's name and slot) with ACLs
// on and one simulated GPU of four shares, bootstraps the ACLs, and returns
// it driven by the management token.
func NewACLAgent(t *testing.T, c *C, name string, slot int) *Agent {
	t.Helper()
	a := NewAgent(t, c, name, slot)
	a.Start(t, a.PluginConfig(OneSimulatedGPU, "enabled = true"), "acl {\n  enabled = true\n}\n")
	var boot struct{ SecretID string }
	Eventually(t, time.Minute, func() error {
		out, err := a.C.CLI(t, "acl", "bootstrap", "-json")
		if err != nil {
			return err
		}
		return json.Unmarshal([]byte(out), &boot)
	})
	a.SetToken(t, boot.SecretID)
	a.WaitNode(t, 2*time.Minute)
	return a
}
