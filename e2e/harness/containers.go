package harness

import (
	"fmt"
	"testing"
	"time"
)

// ContainerDriver is one of the container task drivers every client of the
// local cluster runs (scripts/cluster/runtimes.sh), with the client the
// container tests start its jobs on and the other client, where the tests
// that move a task move it.
type ContainerDriver struct{ Name, Client, Other string }

// ContainerDrivers are Nomad's docker driver (against the cluster's
// dockerd) and Nomad's podman driver plugin (against its podman service).
var ContainerDrivers = []ContainerDriver{
	{Name: "docker", Client: "client1", Other: "client2"},
	{Name: "podman", Client: "client2", Other: "client1"},
}

// RequireDriver fails (never skips) unless the client's named task driver
// is detected and healthy, and returns the client.
func (c *C) RequireDriver(t testing.TB, client, driver string) Client {
	t.Helper()
	cl := c.Client(t, client)
	Eventually(t, time.Minute, func() error {
		node, _, err := c.Nomad.Nodes().Info(cl.NodeID, nil)
		if err != nil {
			return err
		}
		d := node.Drivers[driver]
		if d == nil || !d.Detected || !d.Healthy {
			return fmt.Errorf("%s: the %s driver is not healthy: %+v (a cluster started with CARAVAN_RUNTIMES=none, "+
				"or without dockerd, podman or the podman driver plugin: make e2e-deps podman-driver)", client, driver, d)
		}
		return nil
	})
	return cl
}
