package ui

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/planner/service/source"
)

// Nomad is what the cluster page reads from Nomad (APINomad wraps a
// nomad/api client).
type Nomad interface {
	// Nodes lists the client nodes with their device resources.
	Nodes(ctx context.Context) ([]*nomadapi.NodeListStub, error)
	// Allocations lists every allocation with its allocated resources.
	Allocations(ctx context.Context) ([]*nomadapi.AllocationListStub, error)
	// Stats reads one allocation's resource usage from its client.
	Stats(ctx context.Context, allocID string) (*nomadapi.AllocResourceUsage, error)
	// ScaleStatus reads a job's scaling events.
	ScaleStatus(ctx context.Context, namespace, jobID string) (*nomadapi.JobScaleStatusResponse, error)
}

// APINomad reads through a nomad/api client.
type APINomad struct{ Client *nomadapi.Client }

func (n APINomad) Nodes(ctx context.Context) ([]*nomadapi.NodeListStub, error) {
	q := (&nomadapi.QueryOptions{Params: map[string]string{"resources": "true"}}).WithContext(ctx)
	out, _, err := n.Client.Nodes().List(q)
	return out, err
}

func (n APINomad) Allocations(ctx context.Context) ([]*nomadapi.AllocationListStub, error) {
	q := (&nomadapi.QueryOptions{Namespace: "*", Params: map[string]string{"resources": "true"}}).WithContext(ctx)
	out, _, err := n.Client.Allocations().List(q)
	return out, err
}

func (n APINomad) Stats(ctx context.Context, allocID string) (*nomadapi.AllocResourceUsage, error) {
	return n.Client.Allocations().Stats(&nomadapi.Allocation{ID: allocID}, (&nomadapi.QueryOptions{}).WithContext(ctx))
}

func (n APINomad) ScaleStatus(ctx context.Context, namespace, jobID string) (*nomadapi.JobScaleStatusResponse, error) {
	out, _, err := n.Client.Jobs().ScaleStatus(jobID, (&nomadapi.QueryOptions{Namespace: namespace}).WithContext(ctx))
	return out, err
}

// Share is one GPU share (a device instance) and who holds it.
type Share struct {
	ID      string
	Index   int
	Healthy bool
	// The holder, empty when the share is free.
	AllocID, AllocName, Namespace, Job, Task string
	// Metered use of the holder's reservation (from the allocation's
	// device stats); HasStats is false until the client reported them.
	HasStats     bool
	MemUsedMiB   int64
	MemLimitMiB  int64
	MemPeakMiB   int64 // memory_peak, the reservation's high-water mark (0: not reported)
	SMPercent    int64
	OverLimit    bool
	StatsMessage string
}

// Held reports whether an allocation holds the share.
func (s Share) Held() bool { return s.AllocID != "" }

// GPU is one device group: a physical GPU (or MIG instance) and its shares.
type GPU struct {
	NodeID, Node string
	Device       string // vendor/type/name
	UUID         string // the instance IDs' common prefix
	// From the device group's attributes, when the plugin sets them
	// (caravan's does): the GPU's index on its node (-1: unknown), model,
	// memory, and whether it is a simulated GPU.
	Index     int64
	Model     string
	MemoryMiB int64
	Simulated bool
	Shares    []Share
}

// Used is how many shares are held.
func (g GPU) Used() int {
	n := 0
	for _, s := range g.Shares {
		if s.Held() {
			n++
		}
	}
	return n
}

// ShareRun is consecutive shares of one GPU with the same holder (or
// free): one row of the cluster page.
type ShareRun struct {
	Share          // the first share: the holder and its metered use
	Shares []Share // every share of the run
}

// IDs are the run's share IDs, space-separated.
func (r ShareRun) IDs() string {
	ids := make([]string, len(r.Shares))
	for i, s := range r.Shares {
		ids[i] = s.ID
	}
	return strings.Join(ids, " ")
}

// Runs groups the GPU's shares by holder (a reservation's shares report
// the same use), keeping unhealthy shares on rows of their own.
func (g GPU) Runs() []ShareRun {
	var out []ShareRun
	for _, s := range g.Shares {
		if n := len(out); n > 0 {
			last := &out[n-1]
			if last.AllocID == s.AllocID && last.Task == s.Task && last.Healthy && s.Healthy {
				last.Shares = append(last.Shares, s)
				if !last.HasStats && s.HasStats {
					last.Share = s // same holder: show the share that has stats
				}
				continue
			}
		}
		out = append(out, ShareRun{Share: s, Shares: []Share{s}})
	}
	return out
}

// Holders are the distinct jobs holding shares, in share order.
func (g GPU) Holders() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range g.Shares {
		if k := s.Namespace + "/" + s.Job; s.Held() && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// ClusterView is the cluster page's data.
type ClusterView struct {
	Time   time.Time
	Device string
	GPUs   []GPU
	Err    string
}

// Gatherer reads the cluster view from Nomad, at most once per TTL however
// often the page is viewed: one node list, one allocation list, and one
// stats call per running allocation that holds a share.
type Gatherer struct {
	Nomad  Nomad
	Device string // the configured device name (capacity.device)
	TTL    time.Duration
	Logger hclog.Logger
	Now    func() time.Time

	mu     sync.Mutex
	last   ClusterView
	at     time.Time
	events map[source.JobKey]cachedEvents
}

type cachedEvents struct {
	at  time.Time
	st  *nomadapi.JobScaleStatusResponse
	err error
}

func (g *Gatherer) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// Cluster returns the cached view, refreshing it when older than the TTL.
func (g *Gatherer) Cluster(ctx context.Context) ClusterView {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.at.IsZero() && g.now().Sub(g.at) < g.TTL {
		return g.last
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g.last, g.at = g.gather(ctx), g.now()
	return g.last
}

// ScaleEvents returns a job's scaling status, cached per TTL.
func (g *Gatherer) ScaleEvents(ctx context.Context, namespace, id string) (*nomadapi.JobScaleStatusResponse, error) {
	k := source.JobKey{Namespace: namespace, ID: id}
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.events[k]; ok && g.now().Sub(c.at) < g.TTL {
		return c.st, c.err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := g.Nomad.ScaleStatus(ctx, namespace, id)
	if g.events == nil || len(g.events) > 1000 {
		g.events = map[source.JobKey]cachedEvents{}
	}
	g.events[k] = cachedEvents{at: g.now(), st: st, err: err}
	return st, err
}

func (g *Gatherer) gather(ctx context.Context) ClusterView {
	v := ClusterView{Time: g.now(), Device: g.Device}
	nodes, err := g.Nomad.Nodes(ctx)
	if err != nil {
		v.Err = fmt.Sprintf("reading nodes from Nomad: %v", err)
		return v
	}
	byShare := map[string]*Share{}
	for _, n := range nodes {
		if n.NodeResources == nil {
			continue
		}
		for _, d := range n.NodeResources.Devices {
			if !source.MatchDevice(g.Device, d) {
				continue
			}
			v.GPUs = append(v.GPUs, gpuOf(n, d)...)
		}
	}
	sort.Slice(v.GPUs, func(i, j int) bool {
		a, b := v.GPUs[i], v.GPUs[j]
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		if a.Index != b.Index {
			return a.Index < b.Index
		}
		return a.UUID < b.UUID
	})
	for i := range v.GPUs {
		for j := range v.GPUs[i].Shares {
			s := &v.GPUs[i].Shares[j]
			byShare[v.GPUs[i].NodeID+"/"+s.ID] = s
		}
	}
	allocs, err := g.Nomad.Allocations(ctx)
	if err != nil {
		v.Err = fmt.Sprintf("reading allocations from Nomad: %v", err)
		return v
	}
	for _, a := range allocs {
		if a.ClientStatus != "running" || a.AllocatedResources == nil {
			continue
		}
		held := g.assign(a, byShare)
		if len(held) > 0 {
			g.meter(ctx, a.ID, a.NodeID, held, byShare)
		}
	}
	return v
}

// gpuOf splits a device group into GPUs by the instance IDs' prefix
// ("<uuid>-share-<n>"); a group whose IDs have no share suffix is one GPU.
func gpuOf(n *nomadapi.NodeListStub, d *nomadapi.NodeDeviceResource) []GPU {
	name := d.Vendor + "/" + d.Type + "/" + d.Name
	var out []GPU
	index := map[string]int{}
	for _, inst := range d.Instances {
		uuid, idx := splitShare(inst.ID)
		i, ok := index[uuid]
		if !ok {
			i = len(out)
			index[uuid] = i
			out = append(out, withAttributes(GPU{NodeID: n.ID, Node: n.Name, Device: name, UUID: uuid, Index: -1}, d.Attributes))
		}
		out[i].Shares = append(out[i].Shares, Share{ID: inst.ID, Index: idx, Healthy: inst.Healthy})
	}
	for i := range out {
		sort.Slice(out[i].Shares, func(a, b int) bool { return out[i].Shares[a].Index < out[i].Shares[b].Index })
	}
	return out
}

func splitShare(id string) (string, int) {
	p := strings.LastIndex(id, "-share-")
	if p <= 0 {
		return id, 0
	}
	n, err := strconv.Atoi(id[p+len("-share-"):])
	if err != nil || n < 0 {
		return id, 0
	}
	return id[:p], n
}

// assign marks the shares an allocation holds; it returns their keys
// (node/share ID) by task.
func (g *Gatherer) assign(a *nomadapi.AllocationListStub, byShare map[string]*Share) map[string][]string {
	held := map[string][]string{}
	for task, tr := range a.AllocatedResources.Tasks {
		if tr == nil {
			continue
		}
		for _, dev := range tr.Devices {
			for _, id := range dev.DeviceIDs {
				s, ok := byShare[a.NodeID+"/"+id]
				if !ok {
					continue
				}
				s.AllocID, s.AllocName, s.Namespace, s.Job, s.Task = a.ID, a.Name, a.Namespace, a.JobID, task
				held[task] = append(held[task], a.NodeID+"/"+id)
			}
		}
	}
	return held
}

// meter reads an allocation's stats and fills in its shares' metered use.
func (g *Gatherer) meter(ctx context.Context, allocID, nodeID string, held map[string][]string, byShare map[string]*Share) {
	usage, err := g.Nomad.Stats(ctx, allocID)
	if err != nil {
		for _, keys := range held {
			for _, k := range keys {
				byShare[k].StatsMessage = "no stats: " + err.Error()
			}
		}
		if g.Logger != nil {
			g.Logger.Debug("allocation stats unavailable", "alloc_id", allocID, "error", err)
		}
		return
	}
	for task := range held {
		tu := usage.Tasks[task]
		if tu == nil || tu.ResourceUsage == nil {
			continue
		}
		for _, grp := range tu.ResourceUsage.DeviceStats {
			for id, ds := range grp.InstanceStats {
				s, ok := byShare[nodeID+"/"+id]
				if !ok || ds == nil || ds.Stats == nil {
					continue
				}
				fillStats(s, ds.Stats.Attributes)
			}
		}
	}
}

func fillStats(s *Share, attrs map[string]*nomadapi.StatValue) {
	if v := attrs["memory_used"]; v != nil && v.IntNumeratorVal != nil {
		s.HasStats, s.MemUsedMiB = true, *v.IntNumeratorVal
		if v.IntDenominatorVal != nil {
			s.MemLimitMiB = *v.IntDenominatorVal
		}
	}
	if v := attrs["memory_peak"]; v != nil && v.IntNumeratorVal != nil {
		s.MemPeakMiB = *v.IntNumeratorVal
	}
	if v := attrs["memory_limit"]; v != nil && v.IntNumeratorVal != nil {
		s.MemLimitMiB = *v.IntNumeratorVal
	}
	if v := attrs["sm_utilization"]; v != nil && v.IntNumeratorVal != nil {
		s.HasStats, s.SMPercent = true, *v.IntNumeratorVal
	}
	if v := attrs["over_limit"]; v != nil && v.BoolVal != nil {
		s.OverLimit = *v.BoolVal
	}
}

func withAttributes(g GPU, attrs map[string]*nomadapi.Attribute) GPU {
	if a := attrs["index"]; a != nil && a.IntVal != nil {
		g.Index = *a.IntVal
	}
	if a := attrs["model"]; a != nil && a.StringVal != nil {
		g.Model = *a.StringVal
	}
	if a := attrs["memory"]; a != nil && a.IntVal != nil {
		g.MemoryMiB = *a.IntVal
	}
	if a := attrs["simulated"]; a != nil && a.BoolVal != nil {
		g.Simulated = *a.BoolVal
	}
	return g
}
