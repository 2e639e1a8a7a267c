package harness

import (
	"fmt"
	"testing"
	"time"
)

// ContainerDriver is the task driver of every container test: Nomad's
// docker driver. Each client of the local cluster runs one, against one
// container runtime (scripts/cluster/runtimes.sh); Nomad's podman driver
// plugin is not run (no build of it free of BUSL-1.1 code exists).
const ContainerDriver = "docker"

// RuntimeMeta is the client node meta naming the runtime behind its docker
// driver: docker (dockerd) or podman (podman's Docker-compatible API).
const RuntimeMeta = "caravan.container_runtime"

// ContainerRuntime is one of the local cluster's container runtimes, with
// the client whose docker driver runs it (where the container tests start
// their jobs) and the other client, backed by the other runtime (where the
// tests that move a task move it: from one runtime to the other).
type ContainerRuntime struct{ Name, Client, Other string }

// ContainerRuntimes are dockerd (client1) and podman's Docker-compatible
// API service (client2).
var ContainerRuntimes = []ContainerRuntime{
	{Name: "docker", Client: "client1", Other: "client2"},
	{Name: "podman", Client: "client2", Other: "client1"},
}

// RequireRuntime fails (never skips) unless the client's docker driver is
// detected and healthy and runs the named runtime (its node meta), and
// returns the client.
func (c *C) RequireRuntime(t testing.TB, client, runtime string) Client {
	t.Helper()
	cl := c.Client(t, client)
	Eventually(t, time.Minute, func() error {
		node, _, err := c.Nomad.Nodes().Info(cl.NodeID, nil)
		if err != nil {
			return err
		}
		if got := node.Meta[RuntimeMeta]; got != runtime {
			return fmt.Errorf("%s: node meta %s is %q, want %q (a cluster started with CARAVAN_RUNTIMES=none, "+
				"or without dockerd or podman: make e2e-deps)", client, RuntimeMeta, got, runtime)
		}
		d := node.Drivers[ContainerDriver]
		if d == nil || !d.Detected || !d.Healthy {
			return fmt.Errorf("%s: the docker driver (runtime %s) is not healthy: %+v", client, runtime, d)
		}
		return nil
	})
	return cl
}

// RequireRuntimes requires both clients of rt: rt.Client with rt's runtime
// and rt.Other with the other one.
func (c *C) RequireRuntimes(t testing.TB, rt ContainerRuntime) {
	t.Helper()
	c.RequireRuntime(t, rt.Client, rt.Name)
	for _, o := range ContainerRuntimes {
		if o.Client == rt.Other {
			c.RequireRuntime(t, o.Client, o.Name)
		}
	}
}
