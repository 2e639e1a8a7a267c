package manager

import (
	"strings"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/service/source"
)

// cluster converts the ready nodes to the policy's capacity: GPUs per node
// from the device groups (or the configured fixed count). Only GPUs are
// accounted: CPU and memory are left to Nomad's scheduler.
func (m *Manager) cluster(snap source.Snapshot, s Settings) policy.Cluster {
	var c policy.Cluster
	for _, n := range snap.Nodes {
		if !n.Ready {
			continue
		}
		gpus := n.GPUs
		if s.GPUsPerNode > 0 {
			gpus = s.GPUsPerNode
		}
		if gpus == 0 {
			continue
		}
		c.Nodes = append(c.Nodes, policy.Node{ID: n.ID, GPUs: gpus, Class: n.Name})
	}
	return c
}

// sharesPerGPU is the configured value, else the largest device group seen.
func sharesPerGPU(snap source.Snapshot, s Settings) int {
	if s.SharesPerGPU > 0 {
		return s.SharesPerGPU
	}
	n := 0
	for _, node := range snap.Nodes {
		n = max(n, node.SharesPerGPU)
	}
	return max(n, 1)
}

// deviceMatches reports whether a jobspec device request names the
// configured GPU device.
func deviceMatches(request, configured string) bool {
	if request == configured {
		return true
	}
	rp, cp := strings.Split(request, "/"), strings.Split(configured, "/")
	// Compare from the type on: "gpu" matches "caravan/gpu" and vice versa.
	typeOf := func(p []string) string {
		if len(p) == 1 {
			return p[0]
		}
		return p[1]
	}
	if typeOf(rp) != typeOf(cp) {
		return false
	}
	if len(rp) >= 2 && len(cp) >= 2 && rp[0] != cp[0] {
		return false
	}
	return true
}

// workerGPURequests are the worker group's device requests for the
// planner's GPU device, in task order.
func workerGPURequests(j *source.Job, s Settings) []*nomadapi.RequestedDevice {
	var out []*nomadapi.RequestedDevice
	for _, tg := range j.Job.TaskGroups {
		if tg.Name == nil || *tg.Name != j.Spec.WorkerGroup {
			continue
		}
		for _, t := range tg.Tasks {
			if t.Resources == nil {
				continue
			}
			for _, d := range t.Resources.Devices {
				if d != nil && deviceMatches(d.Name, s.Device) {
					out = append(out, d)
				}
			}
		}
	}
	return out
}

// workerShares is the GPU shares one worker of the job asks for: its worker
// group's device requests, else the caravan_gpu_shares meta.
func workerShares(j *source.Job, s Settings) int {
	shares := 0
	for _, d := range workerGPURequests(j, s) {
		if d.Count != nil {
			shares += int(*d.Count)
		}
	}
	if shares == 0 {
		shares = j.Spec.GPUShares
	}
	return shares
}

// workerGPUMilli converts a worker's shares to the policy's milli-GPUs.
func workerGPUMilli(j *source.Job, snap source.Snapshot, s Settings) int {
	shares := workerShares(j, s)
	per := sharesPerGPU(snap, s)
	if shares >= per {
		// Above one GPU only whole GPUs are allowed.
		return (shares / per) * policy.MilliGPU
	}
	return shares * policy.MilliGPU / per
}
