package pollux

import (
	"maps"
	"math"

	"github.com/caravan-nomad/caravan/planner/model"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/caravan-nomad/caravan/planner/workload"
)

// batchMode says how a job picks its batch size.
type batchMode int

const (
	// fixedBatch keeps the workload's batch size (Optimus, Tiresias, FIFO).
	fixedBatch batchMode = iota
	// adaptiveBatch picks the batch that maximises the job's predicted
	// goodput for its allocation (AdaptDL/Pollux-style jobs), from the
	// speed model fitted to what jobs of its kind measured and its current
	// gradient statistics.
	adaptiveBatch
)

type profileKey struct {
	nodes, reps int
	bsz         float64
}

// simJob is one job's true (simulated) state.
type simJob struct {
	spec      workload.Job
	app       *Application
	mode      batchMode
	targetBsz float64 // fixed mode: the workload's batch; 0 when adaptive

	submitted  float64
	completion float64 // <0 while running
	placement  []int   // GPUs per node
	alloc      []string
	atomicBsz  float64
	accum      int
	progress   float64
	epoch      int
	rescale    float64
	attained   float64 // GPU-seconds
	restarts   int     // -1 before the first allocation
	gpuSeconds float64
	resumed    float64 // when it last got GPUs after holding none

	// What the job has observed and reported (for fitted models).
	profile          map[profileKey][2]float64 // step, sync
	gradSqr, gradVar float64                   // last reported; 0 before the first step
	firstGrad        [2]float64                // the first report
	curve            []model.LossPoint         // (progress, validation metric) at each epoch's end
	fit              *model.Speed              // own speed model, refitted when profile grows
	fitDirty         bool
	// pool, when set, pools measurements per kind (the goodput-oracle
	// ablation); online jobs fit their own profile, plus, when kinds is
	// set (trait KindPriors), the samples of finished jobs of their kind.
	pool         *appPool
	kinds        *kindHistory
	priorVersion int
}

func newSimJob(spec workload.Job, app *Application, mode batchMode) *simJob {
	j := &simJob{spec: spec, app: app, mode: mode, submitted: spec.Time, completion: -1, restarts: -1,
		targetBsz: float64(spec.BatchSize), profile: map[profileKey][2]float64{}}
	if mode == adaptiveBatch {
		j.targetBsz = 0
	}
	return j
}

// speedModel is the speed model the job picks its batch with: its own
// profile's fit, or its kind's pooled fit when the job is pooled.
func (j *simJob) speedModel() *model.Speed {
	if j.pool != nil {
		return j.pool.fit(j.app.Name)
	}
	samples := j.profile
	if j.kinds != nil {
		if v := j.kinds.version[j.app.Name]; v != j.priorVersion {
			j.priorVersion, j.fitDirty = v, true
		}
		if prior := j.kinds.samples[j.app.Name]; j.fitDirty && len(prior) > 0 {
			samples = maps.Clone(prior)
			maps.Copy(samples, j.profile) // the job's own measurements win
		}
	}
	if j.fitDirty {
		j.fitDirty = false
		if sp, err := fitProfile(samples); err == nil {
			j.fit = sp
		}
	}
	return j.fit
}

func (j *simJob) done() bool { return j.completion >= 0 }

func (j *simJob) replicas() int {
	r := 0
	for _, x := range j.placement {
		r += x
	}
	return r
}

func (j *simJob) nodes() int {
	n := 0
	for _, x := range j.placement {
		if x > 0 {
			n++
		}
	}
	return n
}

func (j *simJob) batch() float64 {
	return float64(j.replicas()) * j.atomicBsz * float64(j.accum+1)
}

// fixedSplit splits a global batch over r replicas the artifact's way.
func (a *Application) fixedSplit(bsz float64, r int, oracle bool) (atomic float64, accum int) {
	local := math.Ceil(bsz/float64(r) - 1e-8)
	accum = int(math.Ceil(local/a.MaxLocalBsz-1e-8)) - 1
	if r == 1 && (oracle || bsz > a.InitBatch) {
		accum = max(1, accum)
	}
	accum = max(accum, 0)
	atomic = math.Ceil(local/float64(accum+1) - 1e-8)
	count := float64(r * (accum + 1))
	atomic = math.Min(atomic, math.Floor(a.MaxBatch/count))
	return atomic, accum
}

// updateBatch picks the atomic batch and accumulation for the current
// placement.
func (j *simJob) updateBatch() {
	r := j.replicas()
	if r == 0 {
		return
	}
	a := j.app
	bsz := j.targetBsz
	if bsz == 0 {
		sp := j.speedModel()
		if sp == nil {
			bsz = math.Max(a.InitBatch, a.MinLocalBsz*float64(r))
		} else {
			sqr, v := j.gradSqr, j.gradVar
			if sqr == 0 && v == 0 && j.kinds != nil {
				sqr, v = j.kinds.gradPrior(a.Name) // not measured yet: what finished jobs of the kind first reported
			}
			_, atomic, accum := bestBatch(a.limits(), sp, sqr, v, j.nodes(), r)
			if atomic > 0 {
				count := float64(r * (accum + 1))
				j.atomicBsz = math.Min(atomic, math.Floor(a.MaxBatch/count))
				j.accum = accum
				return
			}
			bsz = math.Max(a.InitBatch, a.MinLocalBsz*float64(r))
		}
	}
	j.atomicBsz, j.accum = a.fixedSplit(bsz, r, false)
}

// reallocate applies a new placement (nil: suspend).
func (j *simJob) reallocate(placement []int, alloc []string) {
	if len(placement) == 0 {
		j.placement, j.alloc, j.atomicBsz = nil, nil, 0
		return
	}
	j.placement, j.alloc = placement, alloc
	j.updateBatch()
	j.rescale = engine.RestartPenalty
	j.restarts++
}

// observe records a measured step for the job's own speed model.
func (j *simJob) observe(step, sync float64) {
	k := profileKey{j.nodes(), j.replicas(), j.atomicBsz}
	if _, ok := j.profile[k]; ok {
		return
	}
	j.profile[k] = [2]float64{step, sync}
	j.fitDirty = true
	if j.pool != nil {
		j.pool.add(j.app.Name, k, [2]float64{step, sync})
	}
}

// step advances the job by seconds of simulated time starting at now.
// interference is the slowdown (0..1) from sharing a node with another
// multi-node job.
func (j *simJob) step(now, seconds, interference float64) {
	if len(j.placement) == 0 || j.done() {
		return
	}
	gpus := float64(j.replicas())
	delay := math.Min(j.rescale, seconds)
	j.attained += delay * gpus
	j.rescale -= delay
	seconds -= delay
	now += delay
	a := j.app
	for seconds > 0 && !j.done() {
		bsz := j.batch()
		scale := bsz / a.InitBatch
		st, sy := a.Throughput(j.placement, j.atomicBsz)
		accumT := st - sy
		sqr, v := a.GradStats(bsz, j.epoch)
		if j.gradSqr == 0 && j.gradVar == 0 {
			j.firstGrad = [2]float64{sqr, v}
		}
		j.gradSqr, j.gradVar = sqr, v
		gain := model.Gain(sqr, v, scale)
		j.observe(st, sy)
		total := st + accumT*float64(j.accum)
		goodput := gain / total * (1 - interference)
		next := a.Progress(j.epoch + 1)
		if j.progress+goodput*seconds < next {
			j.progress += goodput * seconds
			j.attained += seconds * gpus
			seconds = 0
			j.updateBatch() // as the artifact: re-pick the batch after every stretch, not only at epoch ends
			break
		}
		j.curve = append(j.curve, model.LossPoint{Step: next, Loss: a.Metric(bsz, j.epoch)})
		j.epoch++
		delta := math.Min(math.Round((next-j.progress)/goodput), seconds)
		if j.epoch > a.CompletionEpoch() {
			j.completion = now + delta
		}
		j.progress = next
		j.attained += delta * gpus
		seconds -= delta
		now += delta
		j.updateBatch()
	}
}
