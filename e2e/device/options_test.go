package device_test

import (
	"errors"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// TestDevice_IgnoredGPUIDs starts an agent whose device plugin lists one of
// its two simulated GPUs in ignored_gpu_ids (as it would for a GPU that
// nomad-device-nvidia hands out): only the other is fingerprinted, so no
// share of the ignored GPU can be scheduled.
func TestDevice_IgnoredGPUIDs(t *testing.T) {
	c := harness.Cluster(t)
	a := harness.NewAgent(t, c, "device-ignore", 3)
	a.Start(t, a.PluginConfig(`backend         = "simulated"
ignored_gpu_ids = ["GPU-e2e-given-to-nvidia"]
simulated {
  gpu {
    uuid       = "GPU-e2e-given-to-nvidia"
    model      = "NVIDIA A100-SXM4-40GB"
    memory_mib = 40960
  }
  gpu {
    uuid       = "GPU-e2e-caravan"
    model      = "NVIDIA A100-SXM4-40GB"
    memory_mib = 40960
  }
}`, "enabled = true"))
	node := a.WaitNode(t, 2*time.Minute)
	var names []string
	harness.Eventually(t, time.Minute, func() error {
		groups := shareGroups(t, a.C, node.ID)
		names = names[:0]
		for _, g := range groups {
			names = append(names, g.Name)
		}
		if len(groups) == 0 {
			return errors.New("no GPU fingerprinted yet")
		}
		return nil
	})
	must.Eq(t, []string{"GPU-e2e-caravan"}, names)
}
