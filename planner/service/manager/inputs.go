package manager

import (
	"math"
	"time"

	"github.com/caravan-nomad/caravan/planner/history"
	"github.com/caravan-nomad/caravan/planner/model"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
)

// History is a job's history as the policy is told it (the API's
// "history"): built from Nomad's allocation history with the conversion
// the simulator uses (history.Record).
type History struct {
	Submitted          time.Time `json:"submitted,omitzero"`
	AgeSeconds         float64   `json:"age_seconds"`
	AttainedGPUSeconds float64   `json:"attained_gpu_seconds"`
	Restarts           int       `json:"restarts"`
	TaskRestarts       int       `json:"task_restarts"`
	Allocations        int       `json:"allocations"` // worker allocations Nomad still remembers
}

func historyView(r history.Record, h history.Allocs) *History {
	pj := r.Job()
	return &History{Submitted: r.Submitted, AgeSeconds: pj.Age.Seconds(), AttainedGPUSeconds: r.Attained,
		Restarts: r.Restarts, TaskRestarts: h.TaskRestarts, Allocations: len(h.Spans)}
}

// gradStats is the newest gradient statistics a job reported, with the
// batch they were measured at, and the batch sizes it reported per worker
// count (to tell a fixed global batch from a per-worker one).
type gradStats struct {
	sqr, variance float64
	batch         float64
	batchAt       map[int]int // workers -> reported global batch
}

// observeGrads keeps the newest reported statistics and batch sizes.
func (g *gradStats) observe(recs []ingest.Record) {
	for _, r := range recs {
		if r.GradSqr > 0 || r.GradVar > 0 {
			g.sqr, g.variance, g.batch = r.GradSqr, r.GradVar, float64(r.BatchSize)
		}
		if r.BatchSize > 0 && r.Workers > 0 {
			if g.batchAt == nil {
				g.batchAt = map[int]int{}
			}
			g.batchAt[r.Workers] = r.BatchSize
		}
	}
}

// perWorker reports whether the job's global batch grows with its workers:
// it reported different batch sizes at different worker counts, each the
// same per worker.
func (g *gradStats) perWorker() (local float64, ok bool) {
	first := true
	for w, b := range g.batchAt {
		l := float64(b) / float64(w)
		switch {
		case first:
			local, first = l, false
		case l != local:
			return 0, false
		}
	}
	return local, len(g.batchAt) >= 2
}

// goodput scales a steps/s model by statistical efficiency (Pollux): a step
// at the batch the job runs with w workers is worth gain(w)/gain(now) steps
// at its current batch, where gain is model.Gain of the reported gradient
// statistics. A job with a fixed global batch (the Go trainer's) has the
// same batch at every size: the factor is 1 and goodput is its step rate.
// The planner does not choose live jobs' batch sizes (the simulator's
// adaptive-batch jobs do): the efficiency is that of the batch the job runs.
func (g *gradStats) goodput(steps policy.SpeedModel, batchNow float64) policy.SpeedModel {
	local, ok := g.perWorker()
	if steps == nil || !ok || g.batch <= 0 || batchNow <= 0 || (g.sqr == 0 && g.variance == 0) {
		return steps
	}
	now := model.Gain(g.sqr, g.variance, batchNow/g.batch)
	return policy.SpeedFunc(func(s policy.Shape) float64 {
		r := steps.Rate(s)
		if s.Workers <= 0 || r <= 0 {
			return r
		}
		f := model.Gain(g.sqr, g.variance, local*float64(s.Workers)/g.batch) / now
		if math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
			return r
		}
		return r * f
	})
}
