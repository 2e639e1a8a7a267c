// Package device_test runs caravan's fractional-GPU device plugin in the
// real two-client cluster (simulated backend, scripts/cluster/
// plugin-device.hcl: two GPUs of four shares on each client).
package device_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
	"github.com/caravan-nomad/caravan/internal/interference"
)

const (
	vendor     = "caravan"
	deviceType = "gpushare"
	task       = "worker"

	fractionJob = "jobspecs/gpu-fraction.nomad.hcl"
	wholeJob    = "jobspecs/gpu-whole.nomad.hcl"
	modelJob    = "jobspecs/gpu-model.nomad.hcl"
)

// shareGroups returns a node's caravan share groups, by GPU index.
func shareGroups(t *testing.T, c *harness.C, nodeID string) []*nomadapi.NodeDeviceResource {
	t.Helper()
	node, _, err := c.Nomad.Nodes().Info(nodeID, nil)
	must.NoError(t, err)
	var out []*nomadapi.NodeDeviceResource
	for _, d := range node.NodeResources.Devices {
		if d.Vendor == vendor && d.Type == deviceType {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return *out[i].Attributes["index"].IntVal < *out[j].Attributes["index"].IntVal
	})
	return out
}

// gpuOf returns the single device assignment of the allocation's task.
func gpuOf(t *testing.T, a *nomadapi.Allocation) *nomadapi.AllocatedDeviceResource {
	t.Helper()
	devs := a.AllocatedResources.Tasks[task].Devices
	must.Len(t, 1, devs, must.Sprintf("allocation %s", a.ID))
	must.Eq(t, vendor, devs[0].Vendor)
	must.Eq(t, deviceType, devs[0].Type)
	return devs[0]
}

// taskEnv waits for the task's printed environment and parses it.
func taskEnv(t *testing.T, c *harness.C, allocID string) map[string]string {
	t.Helper()
	env := map[string]string{}
	harness.Eventually(t, time.Minute, func() error {
		out, err := c.CLI(t, "alloc", "logs", allocID, task)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				env[k] = v
			}
		}
		if env["CARAVAN_GPU_RESERVATION"] == "" {
			return fmt.Errorf("no CARAVAN_GPU_RESERVATION in the task's output yet")
		}
		return nil
	})
	return env
}

func TestDevice_NodesAdvertiseShares(t *testing.T) {
	c := harness.Cluster(t)
	seen := map[string]bool{}
	for _, cl := range c.Clients {
		var groups []*nomadapi.NodeDeviceResource
		harness.Eventually(t, time.Minute, func() error {
			groups = shareGroups(t, c, cl.NodeID)
			if len(groups) != 2 {
				return fmt.Errorf("%s advertises %d share groups, want 2", cl.Name, len(groups))
			}
			return nil
		})
		for i, g := range groups {
			must.Eq(t, *g.Attributes["uuid"].StringVal, g.Name)
			must.False(t, seen[g.Name], must.Sprintf("GPU UUIDs differ between nodes: %s", g.Name))
			seen[g.Name] = true
			must.Eq(t, int64(i), *g.Attributes["index"].IntVal)
			must.Eq(t, "simulated", *g.Attributes["backend"].StringVal)
			must.True(t, *g.Attributes["simulated"].BoolVal)
			must.Eq(t, "NVIDIA A100-SXM4-40GB", *g.Attributes["model"].StringVal)
			must.Eq(t, int64(4), *g.Attributes["shares"].IntVal)
			must.Eq(t, int64(10240), *g.Attributes["memory_per_share"].IntVal)
			must.Len(t, 4, g.Instances)
			for j, inst := range g.Instances {
				must.Eq(t, fmt.Sprintf("%s-share-%d", g.Name, j), inst.ID)
				must.True(t, inst.Healthy, must.Sprint(inst.HealthDescription))
				must.NotNil(t, inst.Locality)
			}
		}
	}
}

// TestDevice_FractionsPackOntoOneGPU: two jobs of 2 of 4 shares land on the
// same GPU with disjoint shares and the right environment; a whole-GPU job
// then takes the other GPU entirely; a further one cannot fit on the node
// and Nomad says why; without the node pin it goes to the other client.
func TestDevice_FractionsPackOntoOneGPU(t *testing.T) {
	c := harness.Cluster(t)
	client1 := c.Client(t, "client1")
	c.RequireQuietGPUs(t, client1.NodeID, vendor)
	groups := shareGroups(t, c, client1.NodeID)
	must.Len(t, 2, groups)

	a := c.RunningAlloc(t, fractionJob, "job_name=e2e-frac-a", "node=client1", "shares=2", "simulated_memory_mib=3000")
	b := c.RunningAlloc(t, fractionJob, "job_name=e2e-frac-b", "node=client1", "shares=2")
	ga, gb := gpuOf(t, a), gpuOf(t, b)
	must.Eq(t, client1.NodeID, a.NodeID)
	must.Eq(t, client1.NodeID, b.NodeID)
	must.Eq(t, ga.Name, gb.Name, must.Sprint("both fractions on one GPU"))
	must.Eq(t, groups[0].Name, ga.Name, must.Sprint("packed onto the lowest-index GPU"))
	must.Len(t, 2, ga.DeviceIDs)
	must.Len(t, 2, gb.DeviceIDs)
	for _, id := range ga.DeviceIDs {
		must.False(t, slices.Contains(gb.DeviceIDs, id), must.Sprintf("share %s given twice", id))
		must.StrHasPrefix(t, ga.Name+"-share-", id)
	}

	for _, alloc := range []*nomadapi.Allocation{a, b} {
		dev := gpuOf(t, alloc)
		env := taskEnv(t, c, alloc.ID)
		ids := slices.Clone(dev.DeviceIDs)
		sort.Strings(ids)
		must.Eq(t, dev.Name, env["CUDA_VISIBLE_DEVICES"])
		must.Eq(t, dev.Name, env["NVIDIA_VISIBLE_DEVICES"])
		must.Eq(t, "50", env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"])
		must.Eq(t, "0=20480M", env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"])
		must.Eq(t, "0.5000", env["CARAVAN_GPU_MEMORY_FRACTION"])
		must.Eq(t, "21474836480", env["CARAVAN_GPU_MEMORY_LIMIT_BYTES"])
		must.Eq(t, "50", env["CARAVAN_GPU_COMPUTE_PERCENT"])
		must.Eq(t, "simulated", env["CARAVAN_GPU_BACKEND"])
		must.Eq(t, strings.Join(ids, ","), env["CARAVAN_GPU_SHARE_IDS"])
	}
	must.NotEq(t, taskEnv(t, c, a.ID)["CARAVAN_GPU_RESERVATION"], taskEnv(t, c, b.ID)["CARAVAN_GPU_RESERVATION"])

	// A whole GPU: all four shares of the other GPU, not a mix.
	w := c.RunningAlloc(t, wholeJob, "job_name=e2e-whole-1", "node=client1")
	gw := gpuOf(t, w)
	must.Eq(t, groups[1].Name, gw.Name)
	must.Len(t, 4, gw.DeviceIDs)
	must.Eq(t, gw.Name, taskEnv(t, c, w.ID)["CUDA_VISIBLE_DEVICES"])

	// client1 is full: a further whole GPU pinned there stays pending with
	// the scheduler's own explanation.
	pending := c.RunJob(t, wholeJob, "job_name=e2e-whole-pending", "node=client1")
	harness.Eventually(t, time.Minute, func() error {
		evals, _, err := c.Nomad.Jobs().Evaluations(pending, nil)
		if err != nil {
			return err
		}
		for _, ev := range evals {
			if m, ok := ev.FailedTGAllocs["train"]; ok {
				for dim := range m.DimensionExhausted {
					if strings.Contains(dim, "devices") {
						t.Logf("placement failure explained by Nomad: %q on %d nodes", dim, m.DimensionExhausted[dim])
						return nil
					}
				}
				return fmt.Errorf("placement failed without a device dimension: %+v", m)
			}
		}
		return fmt.Errorf("no failed placement recorded for %s yet", pending)
	})
	stubs, _, err := c.Nomad.Jobs().Allocations(pending, true, nil)
	must.NoError(t, err)
	must.SliceEmpty(t, stubs)

	// Without the pin the same request goes to the other client.
	elsewhere := c.RunningAlloc(t, wholeJob, "job_name=e2e-whole-elsewhere")
	must.Eq(t, c.Client(t, "client2").NodeID, elsewhere.NodeID)
	must.Len(t, 4, gpuOf(t, elsewhere).DeviceIDs)
}

// deviceRefusals counts the nodes a failed placement refused for their
// devices, as each agent reports it: Nomad 1.6's feasibility check filters
// them ("missing devices"), later agents count an exhausted device
// dimension.
func deviceRefusals(m *nomadapi.AllocationMetric) int {
	return m.ConstraintFiltered["missing devices"] + m.DimensionExhausted["devices: no devices match request"]
}

// TestDevice_TooManySharesForOneGPU: 5 shares exist on every node (8 per
// node) but not on any one GPU, so Nomad does not place the job.
func TestDevice_TooManySharesForOneGPU(t *testing.T) {
	c := harness.Cluster(t)
	jobID := c.RunJob(t, fractionJob, "job_name=e2e-frac-five", "shares=5")
	harness.Eventually(t, time.Minute, func() error {
		evals, _, err := c.Nomad.Jobs().Evaluations(jobID, nil)
		if err != nil {
			return err
		}
		for _, ev := range evals {
			if m, ok := ev.FailedTGAllocs["train"]; ok {
				n := deviceRefusals(m)
				if n != len(c.Clients) {
					return fmt.Errorf("nodes refused for their devices: %d, want %d: %+v", n, len(c.Clients), m)
				}
				return nil
			}
		}
		return fmt.Errorf("no failed placement recorded for %s yet", jobID)
	})
	stubs, _, err := c.Nomad.Jobs().Allocations(jobID, true, nil)
	must.NoError(t, err)
	must.SliceEmpty(t, stubs)
}

// TestDevice_AllocationStats reads per-allocation GPU stats through the
// client allocation stats API: memory used against the share limit, the
// over-limit flag, SM utilisation.
func TestDevice_AllocationStats(t *testing.T) {
	c := harness.Cluster(t)
	within := c.RunningAlloc(t, modelJob, "job_name=e2e-model-stats", "shares=2")
	over := c.RunningAlloc(t, fractionJob, "job_name=e2e-frac-over", "shares=1", "simulated_memory_mib=12000")

	check := func(alloc *nomadapi.Allocation, usedMiB, limitMiB int64, overLimit bool) {
		t.Helper()
		dev := gpuOf(t, alloc)
		harness.Eventually(t, time.Minute, func() error {
			usage, err := c.Nomad.Allocations().Stats(alloc, nil)
			if err != nil {
				return err
			}
			tu, ok := usage.Tasks[task]
			if !ok || tu.ResourceUsage == nil || len(tu.ResourceUsage.DeviceStats) != 1 {
				return fmt.Errorf("no device stats for %s yet", alloc.ID)
			}
			g := tu.ResourceUsage.DeviceStats[0]
			if g.Vendor != vendor || g.Type != deviceType || g.Name != dev.Name {
				return fmt.Errorf("stats for %s/%s/%s, want %s", g.Vendor, g.Type, g.Name, dev.Name)
			}
			if len(g.InstanceStats) != len(dev.DeviceIDs) {
				return fmt.Errorf("stats for %d shares, want %d", len(g.InstanceStats), len(dev.DeviceIDs))
			}
			for _, id := range dev.DeviceIDs {
				s := g.InstanceStats[id]
				if s == nil || s.Stats == nil {
					return fmt.Errorf("no stats for share %s", id)
				}
				attrs := s.Stats.Attributes
				used := attrs["memory_used"]
				if used == nil || used.IntNumeratorVal == nil || *used.IntNumeratorVal != usedMiB {
					return fmt.Errorf("share %s: memory_used %+v, want %d MiB", id, used, usedMiB)
				}
				if *used.IntDenominatorVal != limitMiB || *attrs["memory_limit"].IntNumeratorVal != limitMiB {
					return fmt.Errorf("share %s: limit %d, want %d MiB", id, *used.IntDenominatorVal, limitMiB)
				}
				if *attrs["over_limit"].BoolVal != overLimit {
					return fmt.Errorf("share %s: over_limit %v, want %v", id, *attrs["over_limit"].BoolVal, overLimit)
				}
				if *attrs["sm_utilization"].IntNumeratorVal != 20 || *attrs["processes"].IntNumeratorVal != 1 {
					return fmt.Errorf("share %s: sm %d%% with %d processes, want 20%% with 1",
						id, *attrs["sm_utilization"].IntNumeratorVal, *attrs["processes"].IntNumeratorVal)
				}
				if s.Summary == nil || *s.Summary.IntNumeratorVal != usedMiB {
					return fmt.Errorf("share %s: summary %+v", id, s.Summary)
				}
			}
			return nil
		})
	}
	// The plugin config's default simulated usage: 1024 MiB, 20% SM.
	check(within, 1024, 20480, false)
	check(over, 12000, 10240, true)

	out, err := c.CLI(t, "alloc", "status", "-stats", over.ID)
	must.NoError(t, err)
	must.StrContains(t, out, "12000 / 10240 MiB")
}

// TestDevice_XidHealth raises a critical Xid on client2's first GPU through
// the simulated backend's Xid file: its shares turn unhealthy on the node,
// an ignored Xid changes nothing, and the GPU recovers after the quiet
// period (recovery_period in plugin-device.hcl).
func TestDevice_XidHealth(t *testing.T) {
	c := harness.Cluster(t)
	client2 := c.Client(t, "client2")
	groups := shareGroups(t, c, client2.NodeID)
	must.Len(t, 2, groups)
	target, other := groups[0].Name, groups[1].Name
	faultThenRecover(t, c, client2.NodeID, faultFile{
		path:  filepath.Join(c.Dir, "xid-client2"),
		lines: []string{target + " 13", target + " 79"}, // 13: application error, ignored; 79: fallen off the bus, critical
		names: []string{"Xid 79"},
	}, target, other)
}

// faultFile is a simulated fault source: lines appended to path, and the
// words the unhealthy GPU's health description must name.
type faultFile struct {
	path  string
	lines []string
	names []string
}

// faultThenRecover appends f's lines, then waits for target's shares to
// turn unhealthy with a description naming f.names while other stays
// healthy, and for target to recover after the quiet period.
func faultThenRecover(t *testing.T, c *harness.C, nodeID string, f faultFile, target, other string) {
	t.Helper()
	file, err := os.OpenFile(f.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	must.NoError(t, err)
	_, err = file.WriteString(strings.Join(f.lines, "\n") + "\n")
	must.NoError(t, err)
	must.NoError(t, file.Close())
	health := func() (map[string]bool, map[string]string) {
		ok, desc := map[string]bool{}, map[string]string{}
		for _, g := range shareGroups(t, c, nodeID) {
			ok[g.Name] = true
			for _, inst := range g.Instances {
				if !inst.Healthy {
					ok[g.Name] = false
					desc[g.Name] = inst.HealthDescription
				}
			}
		}
		return ok, desc
	}
	harness.Eventually(t, time.Minute, func() error {
		ok, desc := health()
		if ok[target] {
			return fmt.Errorf("%s still healthy", target)
		}
		for _, name := range f.names {
			if !strings.Contains(desc[target], name) {
				return fmt.Errorf("health description %q does not name %q", desc[target], name)
			}
		}
		if !ok[other] {
			return fmt.Errorf("%s became unhealthy too", other)
		}
		return nil
	})
	harness.Eventually(t, 2*time.Minute, func() error {
		if ok, desc := health(); !ok[target] {
			return fmt.Errorf("%s not recovered: %s", target, desc[target])
		}
		return nil
	})
}

// TestDevice_SimulatedOccupancy: two fractions packed on one simulated GPU
// are both listed, with their shares, in the GPU's occupancy file that the
// backend keeps in its state_dir (the tasks get its path); when one stops,
// the file lists only the other.
func TestDevice_SimulatedOccupancy(t *testing.T) {
	c := harness.Cluster(t)
	client1 := c.Client(t, "client1")
	c.RequireQuietGPUs(t, client1.NodeID, vendor)
	a := c.RunningAlloc(t, fractionJob, "job_name=e2e-occ-a", "node=client1", "shares=1")
	b := c.RunningAlloc(t, fractionJob, "job_name=e2e-occ-b", "node=client1", "shares=3")
	gpu := gpuOf(t, a).Name
	must.Eq(t, gpu, gpuOf(t, b).Name, must.Sprint("both fractions on one GPU"))
	envA, envB := taskEnv(t, c, a.ID), taskEnv(t, c, b.ID)
	dir := envA[interference.EnvStateDir]
	must.Eq(t, filepath.Join(c.Dir, "gpu-state", "client1"), dir)

	holders := func(want map[string]int) {
		t.Helper()
		harness.Eventually(t, time.Minute, func() error {
			o, err := interference.ReadFile(dir, gpu)
			if err != nil {
				return err
			}
			got := map[string]int{}
			for _, h := range o.Holders {
				got[h.Reservation] = h.Shares
			}
			if !o.Simulated || !o.MPS || fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("occupancy %+v, want holders %v (simulated, mps)", o, want)
			}
			return nil
		})
	}
	holders(map[string]int{envA["CARAVAN_GPU_RESERVATION"]: 1, envB["CARAVAN_GPU_RESERVATION"]: 3})
	c.StopJob(t, "e2e-occ-b")
	holders(map[string]int{envA["CARAVAN_GPU_RESERVATION"]: 1})
}

// TestDevice_MPSFaultHealth raises a simulated MPS server fault on
// client2's second GPU through the simulated backend's MPS fault file, as
// TestDevice_XidHealth does an Xid: its shares turn unhealthy, the other
// GPU stays healthy, and it recovers after the quiet period.
func TestDevice_MPSFaultHealth(t *testing.T) {
	c := harness.Cluster(t)
	client2 := c.Client(t, "client2")
	groups := shareGroups(t, c, client2.NodeID)
	must.Len(t, 2, groups)
	target, other := groups[1].Name, groups[0].Name
	faultThenRecover(t, c, client2.NodeID, faultFile{
		path:  filepath.Join(c.Dir, "mps-faults-client2"),
		lines: []string{target + " client killed mid-kernel"},
		names: []string{"MPS server fault", "client killed mid-kernel"},
	}, target, other)
}
