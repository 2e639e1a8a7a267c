package pollux

import (
	"math"

	"github.com/caravan-nomad/caravan/planner/history"
	"github.com/caravan-nomad/caravan/planner/model"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
)

// The simulator knows everything about a job (its trace, its exact
// remaining work). What a policy is told depends on its information class
// (policy.Class), and the types enforce it: a job reaches an online policy
// only through onlineJob, whose input is an observed view that has no field
// carrying remaining work, epoch counts or trace tables (a test walks the
// types to prove it); a declared policy also gets the declared view.

// observed is what an online policy may know about a job: what the job has
// measured and reported so far, and its own batch limits.
type observed struct {
	name, kind string
	submitted  float64 // seconds
	now        float64 // seconds: when the job was observed
	attained   float64 // GPU-seconds
	restarts   int
	current    policy.Allocation
	limits     batchLimits
	// profile is the job's own step/sync measurements.
	profile map[profileKey][2]float64
	// fit is the speed model fitted to profile, and with kind priors also
	// to finished same-kind jobs' samples (nil before any measurement).
	fit *model.Speed
	// priorMaxReps is the largest size finished jobs of the kind ran at
	// (0 without kind priors).
	priorMaxReps int
	// gradSqr, gradVar are the gradient statistics last reported (0, 0
	// before the first report).
	gradSqr, gradVar float64
	// progress is the progress reported so far and curve the (progress,
	// validation metric) points reported at epoch ends.
	progress float64
	curve    []model.LossPoint
}

// declared adds what a jobspec can declare: the requested workers and
// batch size.
type declared struct {
	observed
	replicas int
	batch    float64
}

func (j *simJob) observed(now float64, sp *model.Speed) observed {
	return observed{
		name: j.spec.Name, kind: j.app.Name, submitted: j.submitted, now: now,
		attained: j.attained, restarts: max(j.restarts, 0), current: currentAlloc(j), limits: j.app.limits(),
		profile: j.profile, fit: sp, gradSqr: j.gradSqr, gradVar: j.gradVar, progress: j.progress, curve: j.curve,
	}
}

func (j *simJob) declared(now float64) declared {
	return declared{observed: j.observed(now, nil), replicas: j.spec.Replicas, batch: float64(j.spec.BatchSize)}
}

// record is the job's history as the live service also describes it.
func (o *observed) record() history.Record {
	return history.Record{
		ID: o.name, Kind: o.kind, Submitted: engine.At(o.submitted), Now: engine.At(o.now),
		Attained: o.attained, Restarts: o.restarts, Current: o.current,
		RestartCost: engine.Seconds(engine.RestartPenalty),
	}
}

// baseJob is the part of a policy.Job every class may see: the history
// conversion the live service shares (history.Record.Job), one whole GPU
// per worker, at least one worker.
func baseJob(o *observed) policy.Job {
	return sizedJob(policy.Traits{}, o, history.Request{})
}

// sizedJob is the history of o with a request of one GPU per worker, sized
// by the traits where the live manager sizes its jobs
// (history.Request.Apply).
func sizedJob(tr policy.Traits, o *observed, req history.Request) policy.Job {
	req.Worker = policy.Demand{GPUMilli: policy.MilliGPU}
	return o.record().PolicyJob(tr, req)
}

// maxExplore is Pollux's exploration rule: at most twice the largest size
// measured, 64 GPUs, and the largest batch over the smallest per-GPU batch.
func maxExplore(l batchLimits, maxProfiled int) int {
	return min(max(2*maxProfiled, 1), 64, int(l.MaxBatch/l.MinLocalBsz))
}

func maxProfiled(profile map[profileKey][2]float64) int {
	m := 0
	for k := range profile {
		m = max(m, k.reps)
	}
	return m
}

// onlineJob describes a job to an online policy: its own fitted goodput,
// Pollux's exploration cap, and (for policies that use it) remaining work
// estimated from what it and finished jobs of its kind have shown.
func onlineJob(tr policy.Traits, o *observed, kinds *kindHistory) policy.Job {
	// The requested size is declared, not observed: an online view has none.
	if o.fit == nil || len(o.profile) == 0 {
		// Never measured (no gradient statistics yet): one GPU, no model.
		return sizedJob(tr, o, history.Request{Max: maxExplore(o.limits, maxProfiled(o.profile))})
	}
	pj := sizedJob(tr, o, history.Request{Max: maxExplore(o.limits, max(maxProfiled(o.profile), o.priorMaxReps))})
	pj.Speed = goodputSpeed(o.limits, o.fit, o.gradSqr, o.gradVar)
	if tr.UsesRemaining {
		pj.Remaining, _ = estimateRemaining(o, kinds)
	}
	return pj
}

// declaredJob describes a job to a declared-class policy: at its requested
// size (FixedSize) or between one GPU and its batch over the smallest
// per-GPU batch, with no speed model.
func declaredJob(tr policy.Traits, d *declared) policy.Job {
	return sizedJob(tr, &d.observed, history.Request{Requested: d.replicas, Max: max(int(d.batch/d.limits.MinLocalBsz), 1)})
}

// oracleJob describes a job to an oracle-class policy: everything the
// simulator knows. Fixed-batch policies (Optimus+Oracle) get the trace's
// exact speed and remaining steps; adaptive ones (goodput-oracle) the
// pooled per-kind goodput model and the exact remaining progress.
func oracleJob(tr policy.Traits, j *simJob, now float64, pool *appPool, gpn int) policy.Job {
	o := j.observed(now, nil)
	a := j.app
	if !tr.AdaptiveBatch {
		pj := sizedJob(tr, &o, history.Request{Requested: j.spec.Replicas, Max: max(int(j.targetBsz/a.MinLocalBsz), 1)})
		pj.Speed, pj.Remaining = oracleSpeed(j, gpn)
		return pj
	}
	pj := sizedJob(tr, &o, history.Request{Requested: j.spec.Replicas,
		Max: maxExplore(o.limits, max(maxProfiled(j.profile), pool.maxReps[a.Name]))})
	if sp := pool.fit(a.Name); sp != nil {
		sqr, v := j.gradSqr, j.gradVar
		if sqr == 0 && v == 0 {
			sqr, v = a.GradStats(a.InitBatch, 0) // the oracle may read the trace
		}
		pj.Speed = goodputSpeed(o.limits, sp, sqr, v)
		pj.Remaining = math.Max(a.Progress(a.MaxEpochs)-j.progress, 1e-9)
	}
	return pj
}
