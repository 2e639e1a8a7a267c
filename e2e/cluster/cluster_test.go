// Package cluster holds the e2e tests of the local cluster itself.
package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// TestCluster_TrivialJobOnEachClient runs jobspecs/hello.nomad.hcl pinned to
// each client in turn and reads its output back through the Nomad API.
func TestCluster_TrivialJobOnEachClient(t *testing.T) {
	c := harness.Cluster(t)
	for _, cl := range c.Clients {
		t.Run(cl.Name, func(t *testing.T) {
			id := c.RunJob(t, "jobspecs/hello.nomad.hcl", "node="+cl.Name)
			// One job ID is shared by both runs: each run is stopped and
			// purged before the next starts.
			allocs := c.WaitAllocs(t, id, 2*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
				return len(as) == 1 && as[0].ClientStatus == "complete"
			})
			must.Eq(t, cl.NodeID, allocs[0].NodeID)
			must.Eq(t, fmt.Sprintf("hello from %s", cl.Name), strings.TrimSpace(c.Logs(t, allocs[0].ID, "hello", "stdout")))
			c.StopJob(t, id)
		})
	}
}

// TestCluster_PluginsDetected checks that both clients loaded caravan's
// device plugin and task driver.
func TestCluster_PluginsDetected(t *testing.T) {
	c := harness.Cluster(t)
	for _, cl := range c.Clients {
		node, _, err := c.Nomad.Nodes().Info(cl.NodeID, nil)
		must.NoError(t, err)
		d, ok := node.Drivers["caravan"]
		must.True(t, ok, must.Sprintf("%s has no caravan driver: %v", cl.Name, node.Drivers))
		must.True(t, d.Detected, must.Sprint("caravan driver not detected"))
		must.True(t, d.Healthy, must.Sprintf("caravan driver unhealthy: %s", d.HealthDescription))
		must.Eq(t, "1", node.Attributes["driver.caravan"])
	}
}

// TestCluster_AgentBinaries: the cluster's agents run the binaries the
// suite was pointed at (NOMAD_BIN and CONSUL_BIN, or build/bin's), so a run
// against an operator's own agents tests those; and every client's docker
// driver names its runtime (node meta caravan.container_runtime).
func TestCluster_AgentBinaries(t *testing.T) {
	c := harness.Cluster(t)
	for agent, want := range map[string]string{"consul": c.ConsulBin, "server": c.NomadBin,
		"client1": c.NomadBin, "client2": c.NomadBin} {
		want, err := filepath.EvalSymlinks(want)
		must.NoError(t, err)
		pid, err := os.ReadFile(filepath.Join(c.Dir, "pids", agent+".pid"))
		must.NoError(t, err)
		exe, err := os.Readlink(filepath.Join("/proc", strings.TrimSpace(string(pid)), "exe"))
		must.NoError(t, err)
		must.Eq(t, want, exe, must.Sprintf("the %s agent's executable", agent))
	}
	out, err := c.CLI(t, "version")
	must.NoError(t, err)
	t.Logf("agents: %s (%s), consul %s", strings.SplitN(out, "\n", 2)[0], c.NomadBin, c.ConsulBin)
	for _, rt := range harness.ContainerRuntimes {
		node, _, err := c.Nomad.Nodes().Info(c.Client(t, rt.Client).NodeID, nil)
		must.NoError(t, err)
		if got := node.Meta[harness.RuntimeMeta]; got != "none" {
			must.Eq(t, rt.Name, got, must.Sprintf("%s's runtime", rt.Client))
		}
	}
}
