package manager

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/caravan-nomad/caravan/planner/model"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/source"
)

// maxLossPoints bounds the points one convergence fit uses (an even spread
// over the run plus the newest): model.FitConvergence costs about 70 us per
// point, and a 3-parameter curve needs far fewer than it gets.
const maxLossPoints = 64

// shape is a resource shape a speed was observed at.
type shape struct{ workers, ps, nodes int }

// Fit is what the planner knows about one job's progress: the latest
// report, the fitted models and the predictions derived from them.
type Fit struct {
	Step          int64     `json:"step"`
	Loss          float64   `json:"loss"`
	LastReport    time.Time `json:"last_report,omitzero"`
	StepsPerSec   float64   `json:"steps_per_sec"`
	SamplesPerSec float64   `json:"samples_per_sec"`
	Batch         float64   `json:"batch_size,omitempty"`
	// LastSample is the newest report as the task sent it, every field
	// (steps_total, workers, ps, grad_sqr, grad_var, ...).
	LastSample *ingest.Sample `json:"last_sample,omitempty"`

	Convergence    *model.Convergence  `json:"convergence,omitempty"`
	ConvergenceErr string              `json:"convergence_error,omitempty"`
	Speed          *model.Speed        `json:"speed,omitempty"`
	SpeedErr       string              `json:"speed_error,omitempty"`
	SpeedSamples   []model.SpeedSample `json:"speed_samples,omitempty"`

	// RemainingSteps and where the estimate came from (fit, prior, hint,
	// none); +Inf is reported as -1 in JSON.
	RemainingSteps  float64 `json:"remaining_steps"`
	RemainingSource string  `json:"remaining_source"`
	// Converged is true when the job reached its target loss or stopped
	// improving by more than its threshold.
	Converged bool `json:"converged"`
	// Finished is true when a task reported done, first at FinishedAt.
	Finished   bool      `json:"finished"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// GradSqr and GradVar are the newest gradient statistics the job
	// reported and GradBatch the batch they were measured at (0 before
	// any): the goodput policy's statistical efficiency.
	GradSqr   float64 `json:"grad_sqr,omitempty"`
	GradVar   float64 `json:"grad_var,omitempty"`
	GradBatch float64 `json:"grad_batch_size,omitempty"`
}

// fitLoss fits the convergence model to a job's records.
func fitLoss(recs []ingest.Record) (pts []model.LossPoint, c *model.Convergence, err error) {
	byStep := map[int64]float64{}
	for _, r := range recs {
		byStep[r.Step] = r.Loss // newest wins
	}
	steps := make([]int64, 0, len(byStep))
	for s := range byStep {
		steps = append(steps, s)
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i] < steps[j] })
	if len(steps) > maxLossPoints {
		// Keep an even spread plus the newest points.
		keep := make([]int64, 0, maxLossPoints)
		stride := float64(len(steps)) / float64(maxLossPoints)
		for i := 0; i < maxLossPoints; i++ {
			keep = append(keep, steps[int(float64(i)*stride)])
		}
		keep[len(keep)-1] = steps[len(steps)-1]
		steps = keep
	}
	for _, s := range steps {
		pts = append(pts, model.LossPoint{Step: float64(s), Loss: byStep[s]})
	}
	fit, err := model.FitConvergence(pts, model.ConvergenceFitOptions{})
	if err != nil {
		return pts, nil, err
	}
	if p := nonFinite(fit); p != "" {
		return pts, nil, fmt.Errorf("convergence fit is not finite (%s): the reported losses or steps are out of range", p)
	}
	return pts, &fit, nil
}

// remaining predicts a job's remaining steps the way model.Progress does:
// from the fit, else a prior from a finished job of the same kind, else the
// user's hint. A job that declares its total steps (the task's steps_total,
// else meta caravan_total_steps) never runs past them, so the estimate is
// at most declared - done (source "declared" when that bound decides): a
// loss curve fitted to a short run may predict convergence far beyond the
// run's end.
func remaining(spec source.Spec, declared, done float64, fit, prior *model.Convergence) (float64, model.Source) {
	rem, src := fromCurves(spec, done, fit, prior)
	if declared <= 0 {
		declared = spec.TotalSteps
	}
	if left := math.Max(declared-done, 0); declared > 0 && left < rem {
		return left, model.SourceDeclared
	}
	return rem, src
}

// fromCurves is remaining's estimate from the loss curve, a prior or the hint.
func fromCurves(spec source.Spec, done float64, fit, prior *model.Convergence) (float64, model.Source) {
	delta := spec.ConvergeDelta
	if delta <= 0 {
		delta = 1e-3
	}
	total := func(c model.Convergence) float64 {
		if spec.TargetLoss > 0 {
			if k := c.StepsToLoss(spec.TargetLoss); !math.IsInf(k, 1) {
				return k
			}
		}
		return c.StepsToConverge(delta, 1000)
	}
	switch {
	case fit != nil:
		return math.Max(total(*fit)-done, 0), model.SourceFit
	case prior != nil:
		return math.Max(total(*prior)-done, 0), model.SourcePrior
	case spec.TotalSteps > 0:
		return math.Max(spec.TotalSteps-done, 0), model.SourceHint
	}
	return math.Inf(1), model.SourceNone
}

// speedModel turns observed speeds into a policy.SpeedModel: with two or
// more distinct shapes, Optimus's fitted form; with one, linear scaling from
// that point (the honest cold start); with none, nil (the policy then
// assumes linear scaling itself).
func speedModel(form model.SpeedForm, obs map[shape]float64, batch float64) (policy.SpeedModel, *model.Speed, []model.SpeedSample, error) {
	if len(obs) == 0 {
		return nil, nil, nil, nil
	}
	if batch <= 0 {
		batch = 1
	}
	samples := make([]model.SpeedSample, 0, len(obs))
	for s, r := range obs {
		samples = append(samples, model.SpeedSample{Workers: s.workers, PS: s.ps, Nodes: s.nodes, Batch: batch, StepsPerSec: r})
	}
	sort.Slice(samples, func(i, j int) bool {
		a, b := samples[i], samples[j]
		if a.Workers != b.Workers {
			return a.Workers < b.Workers
		}
		if a.PS != b.PS {
			return a.PS < b.PS
		}
		return a.Nodes < b.Nodes
	})
	distinct := map[int]bool{}
	for _, s := range samples {
		distinct[s.Workers] = true
	}
	// Every prediction is held within what was measured (model.Bounded): a
	// measured shape predicts its measurement, no shape more than linear
	// gain over a measured one, none less than a measured one scaled down.
	// The parameter-server forms do not depend on nodes: neither do their
	// bounds.
	nodeBlind := form == model.PSSync || form == model.PSAsync
	measured := samples
	if nodeBlind {
		measured = make([]model.SpeedSample, len(samples))
		for i, s := range samples {
			s.Nodes = 1
			measured[i] = s
		}
	}
	bounded := func(pred func(s policy.Shape) float64) policy.SpeedModel {
		return policy.SpeedFunc(func(s policy.Shape) float64 {
			if s.Workers <= 0 {
				return 0
			}
			n := max(s.Nodes, 1)
			if nodeBlind {
				n = 1
			}
			return model.Bounded(pred(s), s.Workers, s.PS, n, measured)
		})
	}
	linear := func(w0 int, r0 float64) policy.SpeedModel {
		return bounded(func(s policy.Shape) float64 { return r0 * float64(s.Workers) / float64(w0) })
	}
	if len(distinct) < 2 {
		s := samples[len(samples)-1]
		return linear(s.Workers, s.StepsPerSec), nil, samples, nil
	}
	sp, err := model.FitSpeed(form, samples)
	if err == nil {
		if p := nonFinite(sp); p != "" {
			err = fmt.Errorf("not finite (%s)", p)
		}
	}
	if err != nil {
		s := samples[len(samples)-1]
		return linear(s.Workers, s.StepsPerSec), nil, samples, fmt.Errorf("speed fit: %w", err)
	}
	// As in the simulator: past the largest measured size the prediction is
	// optimistic, so a job explores sizes its fitted synchronisation slope
	// would rule out, but no further than twice what was measured (and one
	// parameter server beyond the most measured).
	return bounded(func(s policy.Shape) float64 {
		w := s.Workers
		if sp.MaxWorkers > 0 && w > 2*sp.MaxWorkers {
			w = 2 * sp.MaxWorkers
		}
		return sp.OptimisticStepsPerSecond(w, s.PS, s.Nodes, batch)
	}), &sp, samples, nil
}

// observe refits a job's models from its progress and records its speed.
// It returns the job's records (oldest first) for the round's other uses.
func (m *Manager) observe(now time.Time, k source.JobKey, j *source.Job, mm *memory, v *JobView, running, nodes int, s Settings) []ingest.Record {
	pk := ingest.JobKey(k)
	recs := m.cfg.Progress.Records(pk)
	f := summarizeRecords(recs)
	mm.grads.observe(recs)
	f.GradSqr, f.GradVar, f.GradBatch = mm.grads.sqr, mm.grads.variance, mm.grads.batch
	m.observeConvergence(&f, j, mm, recs)
	m.observeSpeed(&f, now, pk, j, mm, v, running, nodes, s, recs)
	v.Fit = f
	return recs
}

// summarizeRecords starts a job's fit from its progress reports: the
// furthest step and its loss, the batch size, and when it finished.
func summarizeRecords(recs []ingest.Record) Fit {
	f := Fit{RemainingSteps: -1, RemainingSource: string(model.SourceNone)}
	if n := len(recs); n > 0 {
		last := recs[n-1]
		f.Step, f.Loss, f.LastReport = last.Step, last.Loss, last.Time
		f.LastSample = &last.Sample
		for _, r := range recs {
			if r.Step >= f.Step {
				f.Step, f.Loss = r.Step, r.Loss
			}
			if r.BatchSize > 0 {
				f.Batch = float64(r.BatchSize)
			}
			if r.Done && !f.Finished {
				f.Finished, f.FinishedAt = true, r.Time
			}
		}
	}
	return f
}

// observeConvergence fits the loss curve (again only when new reports came),
// estimates the remaining steps and decides whether the job converged.
func (m *Manager) observeConvergence(f *Fit, j *source.Job, mm *memory, recs []ingest.Record) {
	if n := len(recs); n > 0 && (n != mm.fitN || !recs[n-1].Time.Equal(mm.fitAt)) {
		_, mm.fit, mm.fitErr = fitLoss(recs)
		mm.fitN, mm.fitAt = n, recs[n-1].Time
	}
	conv, err := mm.fit, mm.fitErr
	if len(recs) == 0 {
		conv, err = nil, nil
	}
	if err != nil {
		f.ConvergenceErr = err.Error()
	}
	f.Convergence = conv
	var prior *model.Convergence
	if p, ok := m.priors[j.Spec.Kind]; ok && j.Spec.Kind != "" {
		prior = &p
	}
	declared := 0.0
	if f.LastSample != nil && f.LastSample.StepsTotal > 0 {
		declared = float64(f.LastSample.StepsTotal)
	}
	rem, src := remaining(j.Spec, declared, float64(f.Step), conv, prior)
	f.RemainingSource = string(src)
	if !math.IsInf(rem, 1) {
		f.RemainingSteps = rem
	}
	if conv != nil && src == model.SourceFit {
		f.Converged = rem <= 0 || (j.Spec.TargetLoss > 0 && f.Loss <= j.Spec.TargetLoss)
		if f.Converged && j.Spec.Kind != "" {
			m.priors[j.Spec.Kind] = *conv
		}
	} else if j.Spec.TargetLoss > 0 && len(recs) > 0 && f.Loss <= j.Spec.TargetLoss {
		f.Converged = true
	}
}

// observeSpeed measures the job's speed on its current shape, when the
// shape has been stable, and fits the speed model.
func (m *Manager) observeSpeed(f *Fit, now time.Time, pk ingest.JobKey, j *source.Job, mm *memory, v *JobView, running, nodes int, s Settings, recs []ingest.Record) {
	// Speed: measure only while the shape has been stable, with reports
	// received after it became stable.
	sh := shape{workers: running, ps: 0, nodes: max(nodes, 1)}
	if j.Spec.PSGroup != "" {
		sh.ps = j.Count(j.Spec.PSGroup)
	}
	// A task that says which shape produced its speed is believed over the
	// group counts (which lag a scale while workers join), within the
	// shapes its job may have: a report cannot claim more workers or
	// parameter servers than the job's bounds allow.
	reported := f.LastSample != nil && f.LastSample.Workers > 0 &&
		f.LastSample.Workers <= max(j.Spec.MaxWorkers, v.Workers) && f.LastSample.PS <= max(j.Spec.MaxPS, sh.ps)
	if reported {
		sh.workers, sh.ps = f.LastSample.Workers, f.LastSample.PS
	}
	if counts := [3]int{v.Workers, v.PS, running}; sh != mm.stableShape || counts != mm.stableCounts {
		mm.stableShape, mm.stableCounts, mm.stableSince = sh, counts, now
	}
	since := mm.stableSince
	if w := now.Add(-5 * s.Interval); w.After(since) {
		since = w
	}
	steps, samples, _, ok := m.cfg.Progress.Rate(pk, since)
	if nonFinite([]float64{steps, samples}) != "" {
		steps, samples, ok = 0, 0, false
	}
	f.StepsPerSec, f.SamplesPerSec = steps, samples
	if ok && running > 0 && steadyShape(sh, v, running, j.Spec.PSGroup != "", recs, since) {
		mm.speed[sh] = steps
	}
	form := model.SpeedForm(j.Spec.SpeedModel)
	_, sp, samplesUsed, err := speedModel(form, mm.speed, f.Batch)
	f.Speed, f.SpeedSamples = sp, samplesUsed
	if err != nil {
		f.SpeedErr = err.Error()
	}
}

// steadyShape reports whether a speed measured since since belongs to shape
// sh: no scale is in flight (every worker asked for runs; the servers the
// task reports, one per allocation, are those asked for) and every report
// in the window that names its shape names sh. A speed taken while the
// shape was changing (a shrink's pause, a server re-sharding) would teach
// the fit that the new shape is slow. The reported worker count may differ
// from the group's (one allocation may run several workers).
func steadyShape(sh shape, v *JobView, running int, hasPS bool, recs []ingest.Record, since time.Time) bool {
	if running != v.Workers || (hasPS && sh.ps != v.PS) {
		return false
	}
	for i := len(recs) - 1; i >= 0 && !recs[i].Time.Before(since); i-- {
		r := recs[i]
		if r.Workers > 0 && (r.Workers != sh.workers || (hasPS && r.PS != sh.ps)) {
			return false
		}
	}
	return true
}
