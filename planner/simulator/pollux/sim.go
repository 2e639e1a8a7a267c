package pollux

import (
	"fmt"
	"math"
	"time"

	"github.com/caravan-nomad/caravan/planner/model"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/queue"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/caravan-nomad/caravan/planner/workload"
)

// Simulate replays jobs under the named policy.
func Simulate(cfg engine.Config, policyName string, jobs []workload.Job, apps map[string]*Application) (engine.Result, error) {
	cfg = cfg.WithDefaults()
	pol, err := policy.New(policyName)
	if err != nil {
		return engine.Result{}, err
	}
	if am, ok := pol.(policy.ArtifactMode); ok {
		am.UseArtifactMode()
	}
	r := &simRun{cfg: cfg, pol: pol, info: pol.Info(), kinds: newKindHistory()}
	if r.info.Class == policy.ClassOracle && r.info.Traits.AdaptiveBatch {
		r.pool = newAppPool() // the oracle ablation pools measurements per kind
	}
	sj, err := r.newSimJobs(policyName, jobs, apps)
	if err != nil {
		return engine.Result{}, err
	}
	r.cluster, r.nodeIndex = simCluster(cfg)
	res := engine.Result{Policy: policyName, GPUs: cfg.Nodes * cfg.GPUsPerNode}
	var gpuSeconds float64
	now := 0.0
	lastProgress := 0.0
	for {
		if cfg.Record {
			res.Trace = append(res.Trace, traceOf(now, sj))
		}
		slow := interferenceOf(sj, cfg.Interference)
		for _, j := range sj {
			if j.submitted < now+cfg.Interval || len(j.placement) > 0 {
				j.step(now, cfg.Interval, slow[j])
			}
			gpuSeconds += float64(j.replicas()) * cfg.Interval
		}
		now += cfg.Interval
		active, remaining := r.sweep(sj, now, &lastProgress)
		if remaining == 0 {
			break
		}
		if now > cfg.MaxTime || now-lastProgress > 20*24*3600 {
			return res, fmt.Errorf("%w: %d jobs unfinished at t=%.0fs under %s", engine.ErrStuck, remaining, now, policyName)
		}
		if len(active) == 0 {
			continue
		}
		if err := r.decide(&res, active, now, &lastProgress); err != nil {
			return res, err
		}
	}
	summarize(&res, cfg, sj, gpuSeconds, now)
	return res, nil
}

// simRun is one replay's fixed parts: the policy and what its information
// class may see, and the simulated cluster.
type simRun struct {
	cfg       engine.Config
	pol       policy.Policy
	info      policy.Info
	pool      *appPool
	kinds     *kindHistory
	cluster   policy.Cluster
	nodeIndex map[string]int
}

// newSimJobs checks every job against the traces and the cluster and
// builds its simulated state.
func (r *simRun) newSimJobs(policyName string, jobs []workload.Job, apps map[string]*Application) ([]*simJob, error) {
	cfg, info := r.cfg, r.info
	mode := fixedBatch
	if info.Traits.AdaptiveBatch {
		mode = adaptiveBatch
	}
	sj := make([]*simJob, len(jobs))
	for i, j := range jobs {
		app, ok := apps[j.Application]
		if !ok {
			return nil, fmt.Errorf("job %s: no trace for application %q", j.Name, j.Application)
		}
		if info.Traits.FixedSize && j.Replicas > cfg.Nodes*cfg.GPUsPerNode {
			return nil, fmt.Errorf("%w: job %s asks %d GPUs, the cluster has %d, and %s runs jobs only at their requested size",
				engine.ErrStuck, j.Name, j.Replicas, cfg.Nodes*cfg.GPUsPerNode, policyName)
		}
		sj[i] = newSimJob(j, app, mode)
		sj[i].pool = r.pool
		if info.Class == policy.ClassOnline && info.Traits.KindPriors {
			sj[i].kinds = r.kinds
		}
	}
	return sj, nil
}

// simCluster is cfg's cluster and each node's index by ID.
func simCluster(cfg engine.Config) (policy.Cluster, map[string]int) {
	cluster := policy.Cluster{Nodes: make([]policy.Node, cfg.Nodes)}
	for n := range cluster.Nodes {
		cluster.Nodes[n] = policy.Node{ID: fmt.Sprintf("node-%03d", n), GPUs: cfg.GPUsPerNode}
	}
	nodeIndex := map[string]int{}
	for n, node := range cluster.Nodes {
		nodeIndex[node.ID] = n
	}
	return cluster, nodeIndex
}

// sweep frees the jobs that finished (recording them in the kind history)
// and returns the submitted unfinished jobs and the count of unfinished
// ones.
func (r *simRun) sweep(sj []*simJob, now float64, lastProgress *float64) ([]*simJob, int) {
	var active []*simJob
	remaining := 0
	for _, j := range sj {
		if !j.done() {
			remaining++
			if j.submitted <= now {
				active = append(active, j)
			}
		} else if len(j.placement) > 0 {
			j.placement, j.alloc = nil, nil
			*lastProgress = now
			r.kinds.finished(j.app.Name, j.spec.Name, j.progress, j.profile, j.firstGrad)
		}
	}
	return active, remaining
}

// decide runs one policy round over the active jobs and applies its plan.
func (r *simRun) decide(res *engine.Result, active []*simJob, now float64, lastProgress *float64) error {
	cfg := r.cfg
	in := policy.Input{Now: engine.Epoch.Add(time.Duration(now * float64(time.Second))), Cluster: r.cluster}
	in.Jobs = make([]policy.Job, len(active))
	for i, j := range active {
		in.Jobs[i] = jobFor(r.info, j, now, r.pool, r.kinds, cfg.GPUsPerNode)
	}
	qjobs := simQueueJobs(cfg, in.Jobs, active, now)
	t0 := time.Now()
	plan, _, err := engine.PlanWithQueues(r.pol, cfg.Queues, in, qjobs)
	res.DecideTime += time.Since(t0)
	res.Rounds++
	if err != nil {
		return err
	}
	for i, j := range active {
		jp := plan.Jobs[i]
		pl, alloc := fromPlacement(jp.Placement, r.nodeIndex)
		if !sameAlloc(alloc, j.alloc) {
			if len(alloc) > 0 {
				*lastProgress = now
				if len(j.alloc) == 0 {
					j.resumed = now
				}
			}
			j.reallocate(pl, alloc)
		}
	}
	return nil
}

// summarize fills res's per-job results, mean JCT, makespan and GPU
// utilisation.
func summarize(res *engine.Result, cfg engine.Config, sj []*simJob, gpuSeconds, now float64) {
	var sum, first, last float64
	first = math.Inf(1)
	for _, j := range sj {
		r := engine.JobResult{Name: j.spec.Name, Application: j.spec.Application, Submitted: j.submitted,
			Completed: j.completion, JCT: j.completion - j.submitted, Restarts: max(j.restarts, 0)}
		res.Jobs = append(res.Jobs, r)
		res.Restarts += r.Restarts
		sum += r.JCT
		first = math.Min(first, j.submitted)
		last = math.Max(last, j.completion)
	}
	res.AvgJCT = sum / float64(len(sj))
	res.Makespan = last - first
	if res.Makespan > 0 {
		res.GPUUtil = gpuSeconds / (float64(cfg.Nodes*cfg.GPUsPerNode) * math.Max(now-first, 1))
	}
}

// simQueueJobs is the queue view of a round's jobs (nil without queues).
func simQueueJobs(cfg engine.Config, pjs []policy.Job, active []*simJob, now float64) []queue.Job {
	if !cfg.Queues.Enabled() {
		return nil
	}
	out := make([]queue.Job, len(pjs))
	for i, j := range active {
		ns := cfg.Namespaces[j.spec.Name]
		if ns == "" {
			ns = "default"
		}
		out[i] = engine.QueueView(&pjs[i], ns, now, j.resumed)
	}
	return out
}

func fromPlacement(pl []policy.NodeAlloc, nodeIndex map[string]int) ([]int, []string) {
	var counts []int
	var alloc []string
	for _, na := range pl {
		if na.Workers == 0 {
			continue
		}
		counts = append(counts, na.Workers)
		for w := 0; w < na.Workers; w++ {
			alloc = append(alloc, na.Node)
		}
	}
	return counts, alloc
}

func sameAlloc(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func currentAlloc(j *simJob) policy.Allocation {
	a := policy.Allocation{Workers: len(j.alloc)}
	for i, node := range j.alloc {
		if i == 0 || node != j.alloc[i-1] {
			a.Placement = append(a.Placement, policy.NodeAlloc{Node: node})
		}
		a.Placement[len(a.Placement)-1].Workers++
	}
	return a
}

// jobFor describes a simulated job to a policy through the view its
// information class allows (views.go).
func jobFor(info policy.Info, j *simJob, now float64, pool *appPool, kinds *kindHistory, gpn int) policy.Job {
	switch info.Class {
	case policy.ClassOnline:
		o := j.observed(now, j.speedModel())
		if j.kinds != nil {
			o.priorMaxReps = kinds.maxReps[j.app.Name]
		}
		return onlineJob(info.Traits, &o, kinds)
	case policy.ClassDeclared:
		d := j.declared(now)
		return declaredJob(info.Traits, &d)
	default:
		return oracleJob(info.Traits, j, now, pool, gpn)
	}
}

// oracleSpeed is Optimus+Oracle as the Pollux artifact defines it: exact
// steps/s from the traces at the job's fixed batch with the workers packed
// gpn (four in the artifact) per node, and exact remaining steps at epoch
// granularity.
func oracleSpeed(j *simJob, gpn int) (policy.SpeedModel, float64) {
	a := j.app
	ce := a.CompletionEpoch()
	remaining := 1.0
	if ce > j.epoch {
		remaining = a.Iteration(j.targetBsz, ce) - a.Iteration(j.targetBsz, j.epoch)
	}
	memo := map[int]float64{}
	return policy.SpeedFunc(func(s policy.Shape) float64 {
		if v, ok := memo[s.Workers]; ok {
			return v
		}
		w := s.Workers
		var pl []int
		for left := w; left > 0; left -= gpn {
			pl = append(pl, min(left, gpn))
		}
		atomic, accum := a.fixedSplit(j.targetBsz, w, true)
		st, sy := a.Throughput(pl, atomic)
		v := 1 / (st + (st-sy)*float64(accum))
		memo[s.Workers] = v
		return v
	}), remaining
}

// goodputSpeed predicts goodput (progress per second) from a fitted speed
// model and the job's reported gradient statistics, choosing the best batch
// for each shape as the job itself would.
func goodputSpeed(l batchLimits, sp *model.Speed, sqr, v float64) policy.SpeedModel {
	memo := map[[2]int]float64{}
	return policy.SpeedFunc(func(s policy.Shape) float64 {
		k := [2]int{s.Workers, s.Nodes}
		if r, ok := memo[k]; ok {
			return r
		}
		r, _, _ := bestBatch(l, sp, sqr, v, max(s.Nodes, 1), s.Workers)
		memo[k] = r
		return r
	})
}

// appPool pools what jobs measured, per application (model kind), and fits
// one all-reduce speed model per kind; only the goodput-oracle ablation uses
// it. In the traces every job of a kind is identical, so pooling hands a new
// job everyone's measurements: knowledge no online scheduler has.
type appPool struct {
	samples map[string]map[profileKey][2]float64
	maxReps map[string]int
	fits    map[string]*model.Speed
	dirty   map[string]bool
}

func newAppPool() *appPool {
	return &appPool{maxReps: map[string]int{}, samples: map[string]map[profileKey][2]float64{}, fits: map[string]*model.Speed{}, dirty: map[string]bool{}}
}

// add records one measurement of a job of kind app (jobs call it as they
// measure, so a job that finishes between two rounds still contributes).
func (p *appPool) add(app string, k profileKey, v [2]float64) {
	m := p.samples[app]
	if m == nil {
		m = map[profileKey][2]float64{}
		p.samples[app] = m
	}
	p.maxReps[app] = max(p.maxReps[app], k.reps)
	if _, ok := m[k]; !ok {
		m[k] = v
		p.dirty[app] = true
	}
}

func (p *appPool) fit(app string) *model.Speed {
	if !p.dirty[app] {
		return p.fits[app]
	}
	p.dirty[app] = false
	if sp, err := fitProfile(p.samples[app]); err == nil {
		p.fits[app] = sp
	}
	return p.fits[app]
}

// fitProfile fits the all-reduce speed form to step-time measurements.
func fitProfile(profile map[profileKey][2]float64) (*model.Speed, error) {
	samples := make([]model.SpeedSample, 0, len(profile))
	for k, v := range profile {
		samples = append(samples, model.SpeedSample{Workers: k.reps, Nodes: k.nodes, Batch: k.bsz * float64(k.reps), StepsPerSec: 1 / v[0]})
	}
	if len(samples) == 0 {
		return nil, model.ErrNotEnoughPoints
	}
	sortSamples(samples)
	sp, err := model.FitSpeed(model.AllReduce, withPrior(samples))
	if err != nil {
		return nil, err
	}
	return &sp, nil
}

// withPrior adds a pseudo-sample when every sample used one per-GPU batch:
// it states that half the step time is fixed cost and half scales with the
// batch (Pollux's rule for the same situation), so the fit does not assume
// either free or perfectly linear batch scaling from a single point.
func withPrior(samples []model.SpeedSample) []model.SpeedSample {
	if len(samples) == 0 {
		return samples
	}
	local := samples[0].Batch / float64(samples[0].Workers)
	for _, s := range samples[1:] {
		if s.Batch/float64(s.Workers) != local {
			return samples
		}
	}
	s := samples[0]
	prior := s
	prior.Batch = s.Batch * 2
	prior.StepsPerSec = s.StepsPerSec / 1.5
	return append(samples, prior)
}

// interferenceOf finds the multi-node jobs that share a node with another
// multi-node job and returns their slowdown.
func interferenceOf(jobs []*simJob, factor float64) map[*simJob]float64 {
	if factor <= 0 {
		return nil
	}
	count := map[string]int{}
	for _, j := range jobs {
		if j.nodes() > 1 {
			seen := map[string]bool{}
			for _, n := range j.alloc {
				if !seen[n] {
					seen[n] = true
					count[n]++
				}
			}
		}
	}
	out := map[*simJob]float64{}
	for _, j := range jobs {
		if j.nodes() <= 1 {
			continue
		}
		for _, n := range j.alloc {
			if count[n] > 1 {
				out[j] = factor
				break
			}
		}
	}
	return out
}

func traceOf(now float64, sj []*simJob) engine.TraceRound {
	t := engine.TraceRound{Time: now, GPUs: make([]int, len(sj))}
	for i, j := range sj {
		t.GPUs[i] = j.replicas()
	}
	return t
}
