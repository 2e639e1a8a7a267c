package manager

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/planner/packing"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/source"
)

// packMemory is what live packing remembers of a job between rounds
// (planner/POLICY.md, "Live packing"). Rates are online: measured from the
// job's own progress reports, never assumed.
type packMemory struct {
	// key is the job's sharing state as last seen (its neighbours, shares
	// and GPUs held), since when; rounds counts the rounds in which a new
	// report was measured under it, seen the reports measured so far.
	key    string
	since  time.Time
	rounds int
	seen   int
	// neighbours are the jobs sharing its GPUs under key; shares its
	// shares per worker there.
	neighbours []string
	shares     int
	// solo is its rate measured alone, by shares per worker; packed its
	// rate under key when key has neighbours (0: not measured).
	solo   map[int]float64
	packed float64
	// history is the mean packed/solo ratio it showed with earlier
	// neighbours, over historyN pairings.
	history  float64
	historyN int
	// avoid are the jobs it was unpacked from.
	avoid []string
}

// observe moves the job's sharing state to key (folding a measured
// pairing that ended into its history) and measures its rate under it.
func (pm *packMemory) observe(now time.Time, key string, neighbours []string, shares int, recs []ingest.Record) {
	if key != pm.key {
		if len(pm.neighbours) > 0 && pm.packed > 0 && pm.solo[pm.shares] > 0 {
			r := pm.packed / pm.solo[pm.shares]
			pm.history = (pm.history*float64(pm.historyN) + r) / float64(pm.historyN+1)
			pm.historyN++
		}
		pm.key, pm.since, pm.rounds, pm.seen, pm.packed = key, now, 0, 0, 0
		pm.neighbours, pm.shares = neighbours, shares
	}
	rate, n := windowRate(recs, pm.since)
	if n == 0 {
		return
	}
	if n > pm.seen {
		pm.rounds++
		pm.seen = n
	}
	if len(neighbours) == 0 {
		if pm.solo == nil {
			pm.solo = map[int]float64{}
		}
		pm.solo[shares] = rate
		return
	}
	pm.packed = rate
}

// windowRate is the mean samples/s of the reports after since, and how
// many it rests on. Each allocation's first report after since is left
// out: its window may straddle the change of neighbours.
func windowRate(recs []ingest.Record, since time.Time) (float64, int) {
	first := map[string]bool{}
	sum, n := 0.0, 0
	for _, r := range recs {
		if !r.Time.After(since) {
			continue
		}
		if !first[r.AllocationID] {
			first[r.AllocationID] = true
			continue
		}
		sum += r.SamplesPerSec
		n++
	}
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n), n
}

// packGPU is one GPU of the round's packing input, where it is.
type packGPU struct {
	packing.GPU
	node string
}

// packJob is one running job of the round's packing input.
type packJob struct {
	key  source.JobKey
	job  *source.Job
	mm   *memory
	view int // index in Round.Jobs
}

// packInputs builds the packing policy's input from the cluster: every GPU
// of the configured device (uuid, share count, MPS), and every running
// job's GPUs (from its running workers' allocated share IDs), shares and
// measured rates. Jobs appear under their "namespace/id".
func (b *roundBuilder) packInputs() (packing.Input, []packGPU, []packJob) {
	var in packing.Input
	var gpus []packGPU
	byInstance := map[string]int{}
	for _, n := range b.snap.Nodes {
		for _, g := range n.GPUList {
			i := len(gpus)
			gpus = append(gpus, packGPU{GPU: packing.GPU{ID: g.ID, Shares: g.Shares, MPS: g.MPS}, node: n.Name})
			in.GPUs = append(in.GPUs, gpus[i].GPU)
			for _, id := range g.Instances {
				byInstance[id] = i
			}
		}
	}
	var jobs []packJob
	for vi := range b.r.Jobs {
		v := &b.r.Jobs[vi]
		k := source.JobKey{Namespace: v.Namespace, ID: v.ID}
		j := b.snap.Jobs[k]
		if j == nil || v.State != StateRunning {
			continue
		}
		held, placed := b.heldGPUs(j, byInstance)
		if len(held) == 0 {
			continue
		}
		pj := packing.Job{ID: k.String(), Never: j.Spec.Pack == source.PackNever, Placed: int64(placed)}
		for g, shares := range held {
			pj.GPUs = append(pj.GPUs, g)
			pj.Shares = max(pj.Shares, shares)
		}
		slices.Sort(pj.GPUs)
		pj.Workers, pj.Declared = len(pj.GPUs), pj.Shares
		in.Jobs = append(in.Jobs, pj)
		jobs = append(jobs, packJob{key: k, job: j, mm: b.m.memFor(k), view: vi})
	}
	b.measure(&in, jobs)
	return in, gpus, jobs
}

// heldGPUs are the GPUs the job's running workers hold (index -> shares
// per worker there) and the newest such worker's create index.
func (b *roundBuilder) heldGPUs(j *source.Job, byInstance map[string]int) (map[int]int, uint64) {
	held := map[int]int{}
	var placed uint64
	for _, a := range j.Allocs {
		if a.TaskGroup != j.Spec.WorkerGroup || a.ClientStatus != "running" || a.DesiredStatus != "run" || a.AllocatedResources == nil {
			continue
		}
		per := map[int]int{}
		for _, t := range a.AllocatedResources.Tasks {
			for _, d := range t.Devices {
				if d == nil || !deviceMatches(allocatedDeviceName(d), b.s.Device) {
					continue
				}
				for _, id := range d.DeviceIDs {
					if g, ok := byInstance[id]; ok {
						per[g]++
					}
				}
			}
		}
		for g, n := range per {
			held[g] = max(held[g], n)
		}
		if len(per) > 0 {
			placed = max(placed, a.CreateIndex)
		}
	}
	return held, placed
}

// allocatedDeviceName is an allocated device's "vendor/type/name".
func allocatedDeviceName(d *nomadapi.AllocatedDeviceResource) string {
	return d.Vendor + "/" + d.Type + "/" + d.Name
}

// measure fills each job's neighbours and measured rates into the input,
// moving each job's remembered sharing state to this round's.
func (b *roundBuilder) measure(in *packing.Input, jobs []packJob) {
	res := make([][]int, len(in.GPUs))
	for i := range in.Jobs {
		for _, g := range in.Jobs[i].GPUs {
			res[g] = append(res[g], i)
		}
	}
	for i := range in.Jobs {
		pj := &in.Jobs[i]
		var nb, gpuIDs []string
		for _, g := range pj.GPUs {
			gpuIDs = append(gpuIDs, in.GPUs[g].ID)
			for _, o := range res[g] {
				if o != i && !slices.Contains(nb, in.Jobs[o].ID) {
					nb = append(nb, in.Jobs[o].ID)
				}
			}
		}
		sort.Strings(nb)
		key := strings.Join(nb, ",") + "|" + strings.Join(gpuIDs, ",") + "|" + strconv.Itoa(pj.Shares)
		pm := &jobs[i].mm.pack
		pm.observe(b.now, key, nb, pj.Shares, b.m.cfg.Progress.Records(ingest.JobKey(jobs[i].key)))
		pj.Solo = pm.solo[pj.Shares]
		if len(nb) > 0 {
			pj.Packed, pj.PackedRounds = pm.packed, pm.rounds
		}
		pj.History, pj.HistoryN, pj.Avoid = pm.history, pm.historyN, slices.Clone(pm.avoid)
	}
}
