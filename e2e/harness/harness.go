// Package harness runs e2e tests against caravan's local cluster: real Consul
// and Nomad agents (one server, two clients) on 127.0.0.1, started by
// scripts/cluster.sh. Tests call Cluster(t); they are skipped unless
// CARAVAN_E2E=1, so a plain `go test ./...` stays fast.
package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/internal/cluster"
)

// EnvEnable is the variable that turns e2e tests on.
const EnvEnable = "CARAVAN_E2E"

// DefaultPortBase is the first port of the default cluster; it matches
// scripts/cluster.sh.
const DefaultPortBase = 14600

// C is a running local cluster.
type C struct {
	// Root is the repository root; Dir the cluster's state directory.
	Root, Dir string
	// NomadAddr and ConsulAddr are the agents' HTTP addresses (with scheme).
	NomadAddr, ConsulAddr string
	Nomad                 *nomadapi.Client
	Consul                *consulapi.Client
	// Bin is the caravan binary the cluster's plugins run; jobspecs that run
	// the trainer take it as a variable.
	Bin string
	// CheckpointDir is the checkpoint store both clients share.
	CheckpointDir string
	// NomadBin and ConsulBin are the agents' binaries, the cluster's and
	// the tests' own agents: NOMAD_BIN and CONSUL_BIN, as scripts/cluster.sh
	// reads them, or build/bin's.
	NomadBin, ConsulBin string
	// Clients are the two Nomad clients, client1 then client2.
	Clients []Client
	// Token is the ACL token CLI calls send (empty: none; the shared
	// cluster has no ACLs).
	Token string
}

// Client is one Nomad client agent of the cluster.
type Client struct {
	Name     string
	NodeID   string
	HTTPAddr string
	// DriverMetricsAddr and DeviceMetricsAddr are the plugins' /metrics
	// URLs (their metrics_address in scripts/cluster/plugin-*.hcl).
	DriverMetricsAddr string
	DeviceMetricsAddr string
	// PID is the agent's process ID (0 if not known).
	PID int
}

var (
	upOnce sync.Once
	upErr  error
)

// Cluster returns the local cluster, starting it if it is not running. It
// skips the test unless CARAVAN_E2E=1.
func Cluster(t testing.TB) *C {
	t.Helper()
	if os.Getenv(EnvEnable) != "1" {
		t.Skipf("e2e test: set %s=1 (make e2e does) to run it against a local cluster", EnvEnable)
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	c, err := describe(root)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	upOnce.Do(func() { upErr = c.script("up") })
	if upErr != nil {
		t.Fatalf("harness: starting the cluster: %v", upErr)
	}
	if err := c.connect(); err != nil {
		t.Fatalf("harness: %v", err)
	}
	return c
}

// describe works out the cluster's addresses from the same environment
// variables scripts/cluster.sh reads.
func describe(root string) (*C, error) {
	base := DefaultPortBase
	if v := os.Getenv("CARAVAN_PORT_BASE"); v != "" {
		b, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("CARAVAN_PORT_BASE=%q: %w", v, err)
		}
		base = b
	}
	dir := os.Getenv("CARAVAN_CLUSTER_DIR")
	if dir == "" {
		dir = filepath.Join(root, "build", "cluster")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	c := &C{
		Root:          root,
		Dir:           dir,
		NomadAddr:     fmt.Sprintf("http://127.0.0.1:%d", base+10),
		ConsulAddr:    fmt.Sprintf("http://127.0.0.1:%d", base),
		Bin:           filepath.Join(dir, "plugins", "caravan"),
		CheckpointDir: filepath.Join(dir, "checkpoints"),
		NomadBin:      agentBin("NOMAD_BIN", filepath.Join(root, "build", "bin", "nomad")),
		ConsulBin:     agentBin("CONSUL_BIN", filepath.Join(root, "build", "bin", "consul")),
	}
	for i, name := range []string{"client1", "client2"} {
		c.Clients = append(c.Clients, Client{
			Name:              name,
			HTTPAddr:          fmt.Sprintf("http://127.0.0.1:%d", base+20+10*i),
			DriverMetricsAddr: fmt.Sprintf("http://127.0.0.1:%d/metrics", base+23+10*i),
			DeviceMetricsAddr: fmt.Sprintf("http://127.0.0.1:%d/metrics", base+24+10*i),
		})
	}
	return c, nil
}

// agentBin is the environment variable's path, or def when it is unset.
func agentBin(env, def string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	return def
}

func (c *C) connect() error {
	d, err := cluster.Dial(cluster.Config{NomadAddr: c.NomadAddr, ConsulAddr: c.ConsulAddr})
	if err != nil {
		return err
	}
	c.Nomad, c.Consul = d.Nomad, d.Consul
	nodes, _, err := c.Nomad.Nodes().List(nil)
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	for i := range c.Clients {
		for _, n := range nodes {
			if n.Name == c.Clients[i].Name {
				c.Clients[i].NodeID = n.ID
			}
		}
		if c.Clients[i].NodeID == "" {
			return fmt.Errorf("node %s is not registered", c.Clients[i].Name)
		}
		c.Clients[i].PID = c.readPID(c.Clients[i].Name)
	}
	return nil
}

func (c *C) readPID(agent string) int {
	b, err := os.ReadFile(filepath.Join(c.Dir, "pids", agent+".pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// Client returns the client agent with the given name (client1 or client2).
func (c *C) Client(t testing.TB, name string) Client {
	t.Helper()
	for _, cl := range c.Clients {
		if cl.Name == name {
			return cl
		}
	}
	t.Fatalf("harness: no client named %q", name)
	return Client{}
}

// script runs scripts/cluster.sh with the cluster's environment.
func (c *C) script(args ...string) error {
	cmd := exec.Command(filepath.Join(c.Root, "scripts", "cluster.sh"), args...)
	cmd.Env = append(os.Environ(), "CARAVAN_CLUSTER_DIR="+c.Dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cluster.sh %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "scripts", "cluster.sh")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the repository root (go.mod with scripts/cluster.sh) above the working directory")
		}
		dir = parent
	}
}
