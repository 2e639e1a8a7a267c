package harness

import (
	"fmt"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// RequireQuietGPUs waits (a minute at most) until no allocation holds a
// device of vendor on the node, and fails the test naming the holder
// otherwise: placement assertions assume idle GPUs.
func (c *C) RequireQuietGPUs(t testing.TB, nodeID, vendor string) {
	t.Helper()
	Eventually(t, time.Minute, func() error {
		allocs, _, err := c.Nomad.Nodes().Allocations(nodeID, nil)
		if err != nil {
			return err
		}
		for _, a := range allocs {
			if a.ClientTerminalStatus() || a.AllocatedResources == nil {
				continue
			}
			for _, tr := range a.AllocatedResources.Tasks {
				for _, d := range tr.Devices {
					if d.Vendor == vendor {
						return fmt.Errorf("allocation %s of job %s holds GPU shares on the node", a.ID, a.JobID)
					}
				}
			}
		}
		return nil
	})
}

// RunningAlloc runs a jobspec and waits for its one allocation to run.
func (c *C) RunningAlloc(t testing.TB, path string, vars ...string) *nomadapi.Allocation {
	t.Helper()
	jobID := c.RunJob(t, path, vars...)
	stubs := c.WaitAllocs(t, jobID, 2*time.Minute, func(a []*nomadapi.AllocationListStub) bool { return len(a) == 1 })
	return c.WaitAllocStatus(t, stubs[0].ID, "running", 2*time.Minute)
}
