package source

import (
	"strings"

	nomadapi "github.com/hashicorp/nomad/api"
)

// JobKey identifies a job across namespaces.
type JobKey struct {
	Namespace string
	ID        string
}

func (k JobKey) String() string { return k.Namespace + "/" + k.ID }

// Job is a managed (opted-in) job as last read from Nomad.
type Job struct {
	Key JobKey
	// Job is the full job; Job.JobModifyIndex is the index every write
	// based on this read must enforce.
	Job *nomadapi.Job
	// Spec is the parsed planner meta; SpecErr says why it is unusable.
	Spec    Spec
	SpecErr error
	// Allocs are the job's allocations, newest first.
	Allocs []*nomadapi.AllocationListStub
}

// Count returns the desired count of a task group (0 if absent).
func (j *Job) Count(group string) int {
	for _, tg := range j.Job.TaskGroups {
		if tg.Name != nil && *tg.Name == group && tg.Count != nil {
			return *tg.Count
		}
	}
	return 0
}

// Stopped reports whether the job was stopped (by a user or the planner).
func (j *Job) Stopped() bool { return j.Job.Stop != nil && *j.Job.Stop }

// Node is a client node as the planner sees it for capacity.
type Node struct {
	ID    string
	Name  string
	Ready bool // ready, eligible and not draining
	// GPUs counts the device groups (physical GPUs) of the configured device
	// whose instances (shares) are all healthy, Shares their instances, and
	// SharesPerGPU the most instances one group has.
	Shares       int
	GPUs         int
	SharesPerGPU int
	// MemoryPerShareMiB is the least GPU memory one share of those GPUs
	// holds (their memory_per_share attribute; 0 when none says).
	MemoryPerShareMiB int64
	// GPUList is every device group of the configured device (healthy or
	// not), one per physical GPU, for live packing.
	GPUList []GPU
}

// GPU is one device group of the configured device: one physical GPU.
type GPU struct {
	// ID is its uuid attribute (else the group's name).
	ID string
	// Shares counts its instances; Healthy is true when all are healthy.
	Shares  int
	Healthy bool
	// MPS is its mps attribute: MPS (true) or time-slicing.
	MPS bool
	// Instances are its share instance IDs (what allocations hold).
	Instances []string
}

// Snapshot is a consistent copy of what the source has seen.
type Snapshot struct {
	Jobs  map[JobKey]*Job
	Nodes []Node
	// Synced is true once jobs, allocations and nodes were each read once.
	Synced bool
	// Err is the last error talking to Nomad (nil once a call succeeds).
	Err error
}

// Capacity sums the shares of ready nodes.
func (s Snapshot) Capacity() int {
	n := 0
	for _, node := range s.Nodes {
		if node.Ready {
			n += node.Shares
		}
	}
	return n
}

// MatchDevice reports whether a node device matches a device name the way a
// jobspec's device block does: "type", "vendor/type" or "vendor/type/name".
func MatchDevice(name string, d *nomadapi.NodeDeviceResource) bool {
	parts := strings.Split(name, "/")
	switch len(parts) {
	case 1:
		return parts[0] == d.Type
	case 2:
		return parts[0] == d.Vendor && parts[1] == d.Type
	case 3:
		return parts[0] == d.Vendor && parts[1] == d.Type && parts[2] == d.Name
	}
	return false
}

func nodeFromStub(n *nomadapi.NodeListStub, device string) Node {
	node := Node{
		ID:    n.ID,
		Name:  n.Name,
		Ready: n.Status == "ready" && !n.Drain && n.SchedulingEligibility == "eligible",
	}
	if n.NodeResources != nil {
		for _, d := range n.NodeResources.Devices {
			if !MatchDevice(device, d) {
				continue
			}
			healthy := 0
			g := GPU{ID: d.Name, Shares: len(d.Instances), MPS: boolAttr(d, attrMPS)}
			if a := d.Attributes[attrUUID]; a != nil && a.StringVal != nil && *a.StringVal != "" {
				g.ID = *a.StringVal
			}
			for _, inst := range d.Instances {
				if inst.Healthy {
					healthy++
				}
				g.Instances = append(g.Instances, inst.ID)
			}
			g.Healthy = healthy > 0 && healthy == len(d.Instances)
			node.GPUList = append(node.GPUList, g)
			// A GPU with an unhealthy share (an Xid error) is not offered:
			// the policy allocates whole GPUs' worth of shares.
			if healthy > 0 && healthy == len(d.Instances) {
				node.Shares += healthy
				node.GPUs++
				node.SharesPerGPU = max(node.SharesPerGPU, len(d.Instances))
				node.MemoryPerShareMiB = leastPositive(node.MemoryPerShareMiB, memoryPerShareMiB(d))
			}
		}
	}
	return node
}

// Device plugin attributes live packing reads (device.AttrUUID and
// device.AttrMPS).
const (
	attrUUID = "uuid"
	attrMPS  = "mps"
)

// boolAttr reads a device group's boolean attribute (false when absent).
func boolAttr(d *nomadapi.NodeDeviceResource, name string) bool {
	a := d.Attributes[name]
	return a != nil && a.BoolVal != nil && *a.BoolVal
}

// attrMemoryPerShare is the device plugin's attribute of a share's memory
// (device.AttrMemoryPerShare; the planner does not import the plugin).
const attrMemoryPerShare = "memory_per_share"

// memoryPerShareMiB reads a device group's memory_per_share attribute, in
// MiB (0 when absent or not a positive MiB integer).
func memoryPerShareMiB(d *nomadapi.NodeDeviceResource) int64 {
	a := d.Attributes[attrMemoryPerShare]
	if a == nil || a.IntVal == nil || *a.IntVal <= 0 {
		return 0
	}
	switch a.Unit {
	case "MiB", "":
		return *a.IntVal
	case "GiB":
		return *a.IntVal << 10
	}
	return 0
}

// leastPositive is the smaller of a and b, ignoring zeros.
func leastPositive(a, b int64) int64 {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}
