package model

import (
	"fmt"
	"math"
)

// SpeedForm names a speed model's functional form.
type SpeedForm string

// Speed model forms. In each, f is training steps per second, w workers,
// p parameter servers, n nodes, M the global batch size; all t >= 0.
const (
	// PSAsync is Optimus's asynchronous parameter-server form:
	// f(p,w) = w / (t0 + t1*w/p + t2*w + t3*p).
	PSAsync SpeedForm = "ps-async"
	// PSSync is Optimus's synchronous parameter-server form:
	// f(p,w) = 1 / (t0*M/w + t1 + t2*w/p + t3*w + t4*p).
	PSSync SpeedForm = "ps-sync"
	// AllReduce is the GPU-only data-parallel form (no parameter servers),
	// modelled on ring all-reduce: compute scales with the local batch, the
	// synchronisation cost depends on whether the ring crosses nodes, and
	// grows with the ring's length:
	// 1/f = t0*M/w + t1 + t2*[w>1, n=1] + t3*[n>1] + t4*max(w-2, 0).
	AllReduce SpeedForm = "allreduce"
)

// SpeedSample is one observed speed.
type SpeedSample struct {
	Workers     int     `json:"workers"`
	PS          int     `json:"ps"`
	Nodes       int     `json:"nodes"`
	Batch       float64 `json:"batch"` // global batch size M (samples per step)
	StepsPerSec float64 `json:"steps_per_sec"`
}

// Speed is a fitted speed model.
type Speed struct {
	Form    SpeedForm  `json:"form"`
	Theta   []float64  `json:"theta"` // t0, t1, ... (all >= 0)
	Quality FitQuality `json:"quality"`
	// MaxWorkers is the largest worker count among the fitted samples (0:
	// unknown); OptimisticStepsPerSecond extrapolates no further than it.
	MaxWorkers int `json:"max_workers"`
	// MaxPS is the largest parameter-server count among the fitted samples
	// and PSLevels how many distinct counts they hold. With one level the
	// server terms cannot be told apart from the worker terms (w/p is a
	// multiple of w, p a constant): FitSpeed then fits no server terms, and
	// OptimisticStepsPerSecond applies its bounded server rule.
	MaxPS    int `json:"max_ps"`
	PSLevels int `json:"ps_levels"`
}

// features returns the linear features of the form and whether the fit
// target is w/f (async) rather than 1/f.
func features(form SpeedForm, w, p, n int, m float64) ([]float64, bool, error) {
	fw, fp := float64(w), float64(p)
	switch form {
	case PSAsync:
		if p <= 0 {
			return nil, false, fmt.Errorf("%w: %s needs parameter servers", ErrBadProblem, form)
		}
		return []float64{1, fw / fp, fw, fp}, true, nil
	case PSSync:
		if p <= 0 {
			return nil, false, fmt.Errorf("%w: %s needs parameter servers", ErrBadProblem, form)
		}
		return []float64{m / fw, 1, fw / fp, fw, fp}, false, nil
	case AllReduce:
		intra, inter := 0.0, 0.0
		if n > 1 {
			inter = 1
		} else if w > 1 {
			intra = 1
		}
		return []float64{m / fw, 1, intra, inter, math.Max(fw-2, 0)}, false, nil
	}
	return nil, false, fmt.Errorf("%w: unknown speed form %q", ErrBadProblem, form)
}

// StepsPerSecond predicts the speed for w workers, p parameter servers on
// n nodes with global batch m. It returns 0 for w <= 0 or an impossible shape.
func (s Speed) StepsPerSecond(w, p, n int, m float64) float64 {
	if w <= 0 || len(s.Theta) == 0 {
		return 0
	}
	if n <= 0 {
		n = 1
	}
	f, async, err := features(s.Form, w, p, n, m)
	if err != nil || len(f) != len(s.Theta) {
		return 0
	}
	t := 0.0
	for i := range f {
		t += f[i] * s.Theta[i]
	}
	if t <= 0 {
		return 0
	}
	if async {
		return float64(w) / t
	}
	return 1 / t
}

// OptimisticStepsPerSecond is the speed an explorer assumes. The samples say
// nothing about shapes they never held, so the prediction there is
// optimistic but bounded:
//   - all-reduce: beyond MaxWorkers the ring term t4*max(w-2, 0) stays at its
//     value for the largest ring measured (a slope fitted inside one node,
//     extrapolated, would predict that larger jobs are slower and so keep
//     them from ever being measured; the caller bounds how far it explores,
//     e.g. Pollux's rule of at most twice the largest size measured);
//   - parameter servers: no more than one server beyond MaxPS is explored
//     (more predict what MaxPS+1 does). With a single measured server count
//     P, the fit put all worker-proportional synchronisation on the
//     per-worker term; the explorer assumes that cost is the servers' and
//     divides among them (t3*w*P/p), the most a server can save (at most
//     p/P times faster), and zero when the job scales linearly with workers.
func (s Speed) OptimisticStepsPerSecond(w, p, n int, m float64) float64 {
	switch s.Form {
	case PSSync, PSAsync:
		return s.optimisticPS(w, p, n, m)
	}
	f := s.StepsPerSecond(w, p, n, m)
	if s.Form != AllReduce || s.MaxWorkers <= 0 || w <= s.MaxWorkers || f <= 0 || len(s.Theta) != 5 {
		return f
	}
	t := 1/f - s.Theta[4]*(math.Max(float64(w)-2, 0)-math.Max(float64(s.MaxWorkers)-2, 0))
	if t <= 0 {
		return f
	}
	return 1 / t
}

// optimisticPS is OptimisticStepsPerSecond for the parameter-server forms.
func (s Speed) optimisticPS(w, p, n int, m float64) float64 {
	if s.MaxPS > 0 && p > s.MaxPS+1 {
		p = s.MaxPS + 1
	}
	if s.PSLevels != 1 || p == s.MaxPS || len(s.Theta) < 4 {
		return s.StepsPerSecond(w, p, n, m)
	}
	// One measured level P: move the per-worker term onto the servers.
	th := append([]float64(nil), s.Theta...)
	wIdx, wpIdx := 3, 2 // sync: t2*w/p, t3*w
	if s.Form == PSAsync {
		wIdx, wpIdx = 2, 1 // async: t1*w/p, t2*w
	}
	th[wpIdx] += th[wIdx] * float64(s.MaxPS)
	th[wIdx] = 0
	s.Theta = th
	return s.StepsPerSecond(w, p, n, m)
}

// FitSpeed fits a speed form to samples by non-negative least squares on
// the form's linearisation, each row scaled by its target so residuals are
// relative (a 10% error counts the same for fast and slow samples).
func FitSpeed(form SpeedForm, samples []SpeedSample) (Speed, error) {
	if len(samples) == 0 {
		return Speed{}, fmt.Errorf("%w: no speed samples", ErrNotEnoughPoints)
	}
	levels := map[int]bool{}
	for _, s := range samples {
		levels[s.PS] = true
	}
	// Columns of the server terms, fitted only when the samples vary the
	// server count (else they are collinear with the worker terms).
	var psCols []int
	switch {
	case len(levels) > 1:
	case form == PSSync:
		psCols = []int{2, 4}
	case form == PSAsync:
		psCols = []int{1, 3}
	}
	a := make([][]float64, len(samples))
	b := make([]float64, len(samples))
	for i, s := range samples {
		if s.Workers <= 0 || s.StepsPerSec <= 0 || math.IsNaN(s.StepsPerSec) || math.IsInf(s.StepsPerSec, 0) {
			return Speed{}, fmt.Errorf("%w: sample %d has %d workers and %v steps/s", ErrBadProblem, i, s.Workers, s.StepsPerSec)
		}
		f, async, err := features(form, s.Workers, s.PS, max(s.Nodes, 1), s.Batch)
		if err != nil {
			return Speed{}, fmt.Errorf("sample %d: %w", i, err)
		}
		y := 1 / s.StepsPerSec
		if async {
			y = float64(s.Workers) / s.StepsPerSec
		}
		for k := range f {
			f[k] /= y
		}
		for _, k := range psCols {
			f[k] = 0
		}
		a[i] = f
		b[i] = 1
	}
	theta, _, err := NNLS(a, b)
	if err != nil {
		return Speed{}, err
	}
	sp := Speed{Form: form, Theta: theta, PSLevels: len(levels)}
	for _, s := range samples {
		sp.MaxWorkers = max(sp.MaxWorkers, s.Workers)
		sp.MaxPS = max(sp.MaxPS, s.PS)
	}
	pred := make([]float64, len(samples))
	obs := make([]float64, len(samples))
	for i, s := range samples {
		pred[i] = sp.StepsPerSecond(s.Workers, s.PS, s.Nodes, s.Batch)
		obs[i] = s.StepsPerSec
	}
	sp.Quality = quality(pred, obs)
	return sp, nil
}
