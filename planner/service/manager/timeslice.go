package manager

import (
	"sort"
	"time"

	"github.com/caravan-nomad/caravan/planner/history"
	"github.com/caravan-nomad/caravan/planner/model"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/service/source"
)

// policyJob converts a managed job to the policy's view: its history as
// the simulator describes it too (history.Record), its bounds and demand
// from its meta, its speed from its own measurements.
func (m *Manager) policyJob(now time.Time, j *source.Job, mm *memory, v *JobView, nodes map[string]int, snap source.Snapshot, s Settings, tr policy.Traits) policy.Job {
	spec := j.Spec
	gpuMilli := workerGPUMilli(j, snap, s)
	rec, allocs := history.Live{ID: j.Key.String(), Kind: spec.Kind, Job: j.Job, Allocs: j.Allocs, Group: spec.WorkerGroup,
		GPUMilli: gpuMilli, Workers: v.Workers, RestartCost: s.RestartCost}.Record(now)
	v.History = historyView(rec, allocs)
	// The policy's view of the job's size, built where the simulator's
	// engines build theirs (history.Request.Apply): under FixedSize the job
	// runs at exactly its requested size, all or nothing.
	pj := rec.PolicyJob(tr, spec.Request(gpuMilli))
	pj.Priority = spec.Priority
	if spec.PSGroup != "" {
		pj.MinPS, pj.MaxPS = spec.MinPS, spec.MaxPS
		pj.Current.PS = v.PS
	}
	nodeIDs := make([]string, 0, len(nodes))
	for id := range nodes {
		nodeIDs = append(nodeIDs, id)
	}
	sort.Strings(nodeIDs)
	if len(nodeIDs) > 0 && sumCounts(nodes) == v.Workers {
		for _, id := range nodeIDs {
			pj.Current.Placement = append(pj.Current.Placement, policy.NodeAlloc{Node: id, Workers: nodes[id]})
		}
	}

	// Time-slicing (Gandiva): the policy admits in Submitted order, so the
	// queue key (history.TimeSlice.QueueKey) decides who runs under
	// overload. Here the manager keeps the slice's clock in its memory.
	submitted := now
	if !rec.Submitted.IsZero() {
		submitted = rec.Submitted
	}
	ts := history.TimeSlice{Running: v.Workers > 0, Pinned: !spec.Suspendable, Quantum: s.SuspendQuantum}
	if ts.Running {
		if mm.lastResume.IsZero() {
			mm.lastResume = maxTime(submitted, eventTime(mm.lastOurs))
		}
		mm.waitingSince = time.Time{}
	} else {
		if mm.waitingSince.IsZero() {
			mm.waitingSince = maxTime(submitted, eventTime(mm.lastOurs))
		}
		mm.lastResume = time.Time{}
	}
	ts.Resumed, ts.Waiting = mm.lastResume, mm.waitingSince
	pj.Submitted = ts.QueueKey(submitted, now)

	// Pollux's exploration rule: no more than twice the largest worker
	// count the job's speed was measured at, so a job never measured is
	// not granted the whole cluster on a linear guess.
	if history.Explores(tr) {
		pj.Max = policy.ExploreMax(pj, measuredWorkers(mm.speed))
	}

	// Speed and remaining work, when known, let the policy predict time.
	sm, _, _, _ := speedModel(model.SpeedForm(spec.SpeedModel), mm.speed, v.Fit.Batch)
	if tr.AdaptiveBatch {
		sm = mm.grads.goodput(sm, v.Fit.Batch)
	}
	if sm != nil && v.Fit.RemainingSteps >= 0 {
		pj.Speed, pj.Remaining = sm, v.Fit.RemainingSteps
		v.Predicted = map[int]float64{}
		for w := 0; w <= spec.MaxWorkers; w++ {
			r := sm.Rate(policy.Shape{Workers: w, PS: pj.Current.PS, Nodes: 1})
			if r > 0 {
				v.Predicted[w] = pj.Remaining / r
			} else {
				v.Predicted[w] = -1
			}
		}
	}
	return pj
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// inQuantum reports whether a running job is inside its suspend quantum
// (or may not be suspended at all): time-slicing protects it from
// suspension, under every policy.
func inQuantum(now time.Time, j *source.Job, mm *memory, workers int, s Settings) bool {
	if workers <= 0 {
		return false
	}
	return !j.Spec.Suspendable || (!mm.lastResume.IsZero() && now.Before(mm.lastResume.Add(s.SuspendQuantum)))
}

// measuredWorkers is the largest worker count the job's speed was
// measured at (0: never measured).
func measuredWorkers(obs map[shape]float64) int {
	n := 0
	for sh := range obs {
		n = max(n, sh.workers)
	}
	return n
}
