package ui

import (
	"html/template"
	"math"
	"slices"
	"sort"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/internal/svgplot"
	"github.com/caravan-nomad/caravan/planner/model"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/manager"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

// Class names the browser test (and CSS) look for.
const (
	ClassLossReported = "loss-reported"
	ClassLossFit      = "fit-curve"
	ClassSpeedMeasure = "speed-measured"
	ClassSpeedFit     = "speed-fit"
	IDLossFit         = "loss-fit"
	IDSpeedFit        = "speed-fit"
)

// svg turns svgplot's output (whose every text is escaped) into HTML.
func svg(b []byte) template.HTML { return template.HTML(b) } //nolint:gosec // svgplot escapes every text

// lossChart draws the reported losses, the fitted Optimus curve
// l(k) = 1/(b0 k + b1) + b2 up to the predicted end, and the target loss.
func lossChart(v manager.JobView, recs []ingest.Record) template.HTML {
	c := svgplot.Chart{Title: "loss: reported and fitted (Optimus)", XLabel: "step", YLabel: "loss", Height: 300}
	var xs, ys []float64
	byStep := map[int64]float64{}
	for _, r := range recs {
		byStep[r.Step] = r.Loss
	}
	steps := make([]int64, 0, len(byStep))
	for s := range byStep {
		steps = append(steps, s)
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i] < steps[j] })
	for _, s := range thin(steps, 400) {
		xs, ys = append(xs, float64(s)), append(ys, byStep[s])
	}
	c.Add(svgplot.Series{Name: "reported loss", X: xs, Y: ys, Points: true, Class: ClassLossReported})
	if f := v.Fit.Convergence; f != nil {
		fx, fy := fittedLoss(*f, xs, float64(v.Fit.Step), v.Fit.RemainingSteps)
		c.Add(svgplot.Series{Name: "fitted curve", X: fx, Y: fy, ID: IDLossFit, Class: ClassLossFit})
		if len(ys) > 0 {
			// The reported losses set the scale: a fit's 1/(b0 k + b1)
			// can be huge near step 0, before any report.
			lo, hi := slices.Min(ys), slices.Max(ys)
			if e := fy[len(fy)-1]; !math.IsNaN(e) {
				lo = math.Min(lo, e)
			}
			if t := v.Spec.TargetLoss; t > 0 {
				lo = math.Min(lo, t)
			}
			pad := (hi - lo) * 0.1
			c.YFixed, c.YMin, c.YMax = true, math.Max(lo-pad, math.Min(lo, 0)), hi+pad
		}
	}
	if t := v.Spec.TargetLoss; t > 0 {
		c.HLine("target loss", t)
	}
	return svg(c.SVG())
}

// fittedLoss samples the fitted curve from the first reported step to the
// predicted end (at most three times the steps seen: beyond that the
// curve says little).
func fittedLoss(f model.Convergence, reported []float64, step, remaining float64) ([]float64, []float64) {
	start := 0.0
	if len(reported) > 0 {
		start = reported[0]
	}
	end := step
	if remaining > 0 {
		end += remaining
	}
	if step > 0 && end > 3*step {
		end = 3 * step
	}
	end = math.Max(end, start+1)
	var fx, fy []float64
	for i := 0; i <= 120; i++ {
		k := start + (end-start)*float64(i)/120
		if l := f.Loss(k); !math.IsInf(l, 0) && !math.IsNaN(l) {
			fx, fy = append(fx, k), append(fy, l)
		}
	}
	if len(fy) == 0 {
		return nil, []float64{math.NaN()}
	}
	return fx, fy
}

// speedChart draws the measured samples/s per worker count and the fitted
// speed model over the job's worker range.
func speedChart(v manager.JobView) template.HTML {
	c := svgplot.Chart{Title: "throughput by worker count", XLabel: "workers", YLabel: "samples/s", Height: 300, XInteger: true}
	batch := v.Fit.Batch
	if batch <= 0 {
		batch = 1
	}
	unit := "samples/s"
	if v.Fit.Batch <= 0 {
		unit = "steps/s (batch size not reported)"
		c.YLabel = "steps/s"
	}
	var mx, my []float64
	ps := v.PS
	for _, s := range v.Fit.SpeedSamples {
		mx, my = append(mx, float64(s.Workers)), append(my, s.StepsPerSec*batch)
		if s.PS > 0 {
			ps = s.PS
		}
	}
	c.Add(svgplot.Series{Name: "measured " + unit, X: mx, Y: my, Points: true, Class: ClassSpeedMeasure})
	hi := max(v.Spec.MaxWorkers, v.Workers, 1)
	if len(my) > 0 {
		c.YFixed, c.YMin, c.YMax = true, 0, slices.Max(my)*1.3
	}
	if sp := v.Fit.Speed; sp == nil && len(mx) > 0 {
		// One worker count measured: the planner assumes linear scaling
		// from it (the honest cold start); show that assumption.
		w0, r0 := mx[len(mx)-1], my[len(my)-1]
		c.Add(svgplot.Series{Name: "assumed: linear from the measurement", X: []float64{1, float64(hi)},
			Y: []float64{r0 / w0, r0 * float64(hi) / w0}, Dashed: true, Class: ClassSpeedFit})
		c.YMax = math.Max(c.YMax, r0*float64(hi)/w0*1.05)
	}
	if sp := v.Fit.Speed; sp != nil {
		var fx, fy []float64
		for w := 1; w <= hi; w++ {
			r := sp.OptimisticStepsPerSecond(w, ps, 1, batch) * batch
			if !math.IsNaN(r) && !math.IsInf(r, 0) {
				fx, fy = append(fx, float64(w)), append(fy, r)
			}
		}
		c.Add(svgplot.Series{Name: "fitted " + string(sp.Form) + " model", X: fx, Y: fy, ID: IDSpeedFit, Class: ClassSpeedFit})
		if len(fy) > 0 {
			c.YMax = math.Max(c.YMax, slices.Max(fy)*1.05)
		}
	}
	return svg(c.SVG())
}

// workersChart draws the worker count over time from Nomad's scaling events.
func workersChart(events []nomadapi.ScalingEvent) template.HTML {
	c := svgplot.Chart{Title: "workers over time (Nomad scaling events)", XLabel: "minutes ago", YLabel: "workers", Height: 220, YInteger: true}
	evs := append([]nomadapi.ScalingEvent(nil), events...)
	sort.Slice(evs, func(i, j int) bool { return evs[i].Time < evs[j].Time })
	var xs, ys []float64
	now := time.Now()
	for _, e := range evs {
		// A count changed by a registration (an agent that ignores a
		// scale's index) is a count-less event with the count in its meta.
		count, ok := submit.EventCount(&e)
		if !ok {
			continue
		}
		x := -now.Sub(time.Unix(0, int64(e.Time))).Minutes()
		if len(xs) == 0 && e.Count != nil {
			xs, ys = append(xs, x), append(ys, float64(e.PreviousCount)) // the count before the first event
		}
		xs = append(xs, x)
		ys = append(ys, float64(count))
	}
	if len(xs) > 0 {
		xs, ys = append(xs, 0), append(ys, ys[len(ys)-1])
	}
	c.Add(svgplot.Series{Name: "worker count", X: xs, Y: ys, Step: true, Class: "workers-step"})
	return svg(c.SVG())
}

// thin keeps at most n evenly spread elements, always the last.
func thin[T any](v []T, n int) []T {
	if len(v) <= n {
		return v
	}
	out := make([]T, 0, n)
	stride := float64(len(v)) / float64(n)
	for i := 0; i < n; i++ {
		out = append(out, v[int(float64(i)*stride)])
	}
	out[n-1] = v[len(v)-1]
	return out
}
