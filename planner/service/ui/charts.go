package ui

import (
	"html/template"
	"math"
	"sort"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/internal/svgplot"
	"github.com/caravan-nomad/caravan/planner/service/manager"
	"github.com/caravan-nomad/caravan/planner/service/progress"
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
func lossChart(v manager.JobView, recs []progress.Record) template.HTML {
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
		end := float64(v.Fit.Step)
		if v.Fit.RemainingSteps > 0 {
			end += v.Fit.RemainingSteps
		}
		end = math.Max(end, 1)
		// Beyond three times what was seen the curve says little: stop there.
		if seen := float64(v.Fit.Step); seen > 0 && end > 3*seen {
			end = 3 * seen
		}
		var fx, fy []float64
		for i := 0; i <= 120; i++ {
			k := end * float64(i) / 120
			if l := f.Loss(k); !math.IsInf(l, 0) && !math.IsNaN(l) {
				fx, fy = append(fx, k), append(fy, l)
			}
		}
		c.Add(svgplot.Series{Name: "fitted curve", X: fx, Y: fy, ID: IDLossFit, Class: ClassLossFit})
	}
	if t := v.Spec.TargetLoss; t > 0 {
		c.HLine("target loss", t)
	}
	return svg(c.SVG())
}

// speedChart draws the measured samples/s per worker count and the fitted
// speed model over the job's worker range.
func speedChart(v manager.JobView) template.HTML {
	c := svgplot.Chart{Title: "throughput by worker count", XLabel: "workers", YLabel: "samples/s", Height: 300}
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
	if sp := v.Fit.Speed; sp != nil {
		hi := max(v.Spec.MaxWorkers, v.Workers, 1)
		var fx, fy []float64
		for w := 1; w <= hi; w++ {
			r := sp.OptimisticStepsPerSecond(w, ps, 1, batch) * batch
			if !math.IsNaN(r) && !math.IsInf(r, 0) {
				fx, fy = append(fx, float64(w)), append(fy, r)
			}
		}
		c.Add(svgplot.Series{Name: "fitted " + string(sp.Form) + " model", X: fx, Y: fy, ID: IDSpeedFit, Class: ClassSpeedFit})
	}
	return svg(c.SVG())
}

// workersChart draws the worker count over time from Nomad's scaling events.
func workersChart(events []nomadapi.ScalingEvent) template.HTML {
	c := svgplot.Chart{Title: "workers over time (Nomad scaling events)", XLabel: "minutes ago", YLabel: "workers", Height: 220}
	evs := append([]nomadapi.ScalingEvent(nil), events...)
	sort.Slice(evs, func(i, j int) bool { return evs[i].Time < evs[j].Time })
	var xs, ys []float64
	now := time.Now()
	for _, e := range evs {
		if e.Count == nil {
			continue
		}
		xs = append(xs, -now.Sub(time.Unix(0, int64(e.Time))).Minutes())
		ys = append(ys, float64(*e.Count))
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
