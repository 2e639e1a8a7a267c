package device

import (
	"sort"
	"sync"

	"github.com/caravan-nomad/caravan/device/nvml"
)

// inventory is what the last fingerprint found: the GPUs and MIG instances
// advertised as share groups, by UUID.
type inventory struct {
	mu      sync.RWMutex
	system  nvml.System
	ordered []*gpuEntry
	byUUID  map[string]*gpuEntry
}

// gpuEntry is one advertised GPU or MIG instance.
type gpuEntry struct {
	gpu            nvml.GPU
	shares         int
	clampedFrom    int // configured share count when memory lowered it, else 0
	memoryPerShare uint64
	// ids are the share IDs, built once per fingerprint.
	ids []string
}

// buildInventory keeps the schedulable units of gpus: MIG instances, and
// physical GPUs that are not split into MIG instances, less those
// ignored_gpu_ids lists (a listed GPU takes its MIG instances with it).
// A GPU with a Problem keeps what the previous inventory knew of it.
func buildInventory(s *settings, sys nvml.System, gpus []nvml.GPU, prev *inventory) *inventory {
	hasMIG := map[string]bool{}
	for _, g := range gpus {
		if g.MIG {
			hasMIG[g.ParentUUID] = true
		}
	}
	inv := &inventory{system: sys, byUUID: make(map[string]*gpuEntry, len(gpus))}
	for _, g := range gpus {
		if (!g.MIG && hasMIG[g.UUID]) || s.isIgnored(g) {
			continue
		}
		if g.Problem != "" && prev != nil {
			if old, _, ok := prev.lookup(g.UUID); ok {
				problem := g.Problem
				g = old.gpu
				g.Problem = problem
			}
		}
		n, clamped := s.boundedShares(g)
		e := &gpuEntry{gpu: g, shares: n, clampedFrom: clamped, memoryPerShare: g.MemoryBytes / uint64(n), ids: make([]string, n)}
		for i := range e.ids {
			e.ids[i] = shareID(g.UUID, i)
		}
		inv.ordered = append(inv.ordered, e)
		inv.byUUID[g.UUID] = e
	}
	sort.SliceStable(inv.ordered, func(i, j int) bool {
		a, b := inv.ordered[i].gpu, inv.ordered[j].gpu
		if a.Index != b.Index {
			return a.Index < b.Index
		}
		return a.UUID < b.UUID
	})
	return inv
}

func (inv *inventory) lookup(uuid string) (*gpuEntry, nvml.System, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	e, ok := inv.byUUID[uuid]
	return e, inv.system, ok
}

func (inv *inventory) entries() []*gpuEntry {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.ordered
}
