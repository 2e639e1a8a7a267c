package trainer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caravan-nomad/caravan/planner/model"
)

// benchConfig is the benchmark's job: compute is MODELLED (a sleep of
// ComputePerSample per sample in each worker, standing in for a GPU), and
// large enough to dominate; the model is large enough (~33 KB of
// parameters) that the real gradient exchange over loopback is visible.
func benchConfig(steps uint64) Config {
	c := DefaultConfig()
	c.Features, c.Hidden, c.Batch, c.MicroShards = 128, 32, 128, 16
	c.ComputePerSample, c.Steps, c.LogEvery = time.Millisecond, steps, 0
	if testing.Short() { // `make bench-smoke`: that it runs, not what it measures
		c.ComputePerSample = 100 * time.Microsecond
	}
	return c
}

// measure trains c with w workers and p servers in-process over loopback
// and returns samples/s over the steps after every member has joined.
func measure(tb testing.TB, c Config, w, p int) float64 {
	e := newElastic(tb, c)
	defer e.stopAll()
	e.scaleServers(p - 1)
	e.scaleWorkers(w)
	clock := &stepClock{want: w + p - 1}
	<-e.coordinator(context.Background(), ServerOptions{AfterStep: clock.step, Out: clock})
	clock.mu.Lock()
	defer clock.mu.Unlock()
	if clock.start.IsZero() || clock.last == clock.first {
		tb.Fatalf("workers=%d ps=%d: no step after every member joined", w, p)
	}
	return float64(clock.last-clock.first) * float64(c.Batch) / clock.end.Sub(clock.start).Seconds()
}

// stepClock times the steps after the coordinator has logged want joins.
type stepClock struct {
	mu          sync.Mutex
	want        int
	joined      int
	start, end  time.Time
	first, last uint64
}

func (s *stepClock) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.joined += strings.Count(string(p), " joined at step=")
	return len(p), nil
}

func (s *stepClock) step(step uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.joined < s.want {
		return
	}
	if s.start.IsZero() {
		s.start, s.first = time.Now(), step
	}
	s.end, s.last = time.Now(), step
}

// BenchmarkElastic reports samples/s for 1, 2, 4 and 8 workers with 1 and
// 2 parameter servers (compute MODELLED at 1 ms/sample, 100 µs with -short;
// exchange real).
func BenchmarkElastic(b *testing.B) {
	for _, p := range []int{1, 2} {
		for _, w := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("ps=%d/workers=%d", p, w), func(b *testing.B) {
				sps := measure(b, benchConfig(uint64(20+10*b.N)), w, p)
				b.ReportMetric(sps, "samples/s")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// fitRounds: each shape is measured this many times, interleaved, and its
// best speed kept, so a burst of load from other processes on the machine
// does not decide a point.
const fitRounds = 3

// shapeRounds is fitRounds, or 1 with -short (`make bench-smoke`).
func shapeRounds() int {
	if testing.Short() {
		return 1
	}
	return fitRounds
}

// BenchmarkElasticSpeedFit measures the 8 shapes, fits the planner's
// ps-sync speed model (Optimus: 1/f = t0*M/w + t1 + t2*w/p + t3*w + t4*p)
// to them and fails if any point is off by more than 10% (not with -short).
func BenchmarkElasticSpeedFit(b *testing.B) {
	for i := 0; i < b.N; i++ {
		c := benchConfig(40)
		samples := measureShapes(b, c)
		fit, err := model.FitSpeed(model.PSSync, samples)
		if err != nil {
			b.Fatal(err)
		}
		logFit(b, c, samples, fit)
		b.ReportMetric(100*fit.Quality.MaxRelErr, "max_err_%")
		// -short (`make bench-smoke`, on a shared CI machine) checks that the
		// measurement and the fit run; the 10% bound is `make bench`'s.
		if fit.Quality.MaxRelErr > 0.10 && !testing.Short() {
			b.Errorf("ps-sync fit: a point is %.1f%% off (> 10%%)", 100*fit.Quality.MaxRelErr)
		}
	}
}

func measureShapes(b *testing.B, c Config) []model.SpeedSample {
	var samples []model.SpeedSample
	for _, p := range []int{1, 2} {
		for _, w := range []int{1, 2, 4, 8} {
			samples = append(samples, model.SpeedSample{Workers: w, PS: p, Nodes: 1, Batch: float64(c.Batch)})
		}
	}
	for r := 0; r < shapeRounds(); r++ {
		for k, s := range samples {
			samples[k].StepsPerSec = max(s.StepsPerSec, measure(b, c, s.Workers, s.PS)/float64(c.Batch))
		}
	}
	return samples
}

func logFit(b *testing.B, c Config, samples []model.SpeedSample, fit model.Speed) {
	b.Logf("%s batch=%d micro_shards=%d params=%d, best of %d", c.ComputeLabel(), c.Batch, c.MicroShards, ParamCount(c), shapeRounds())
	b.Logf("| ps | workers | samples/s | ps-sync fit | error |")
	for _, s := range samples {
		pred := fit.StepsPerSecond(s.Workers, s.PS, 1, s.Batch)
		b.Logf("| %d | %d | %.0f | %.0f | %+.1f%% |", s.PS, s.Workers, s.StepsPerSec*s.Batch, pred*s.Batch, 100*(pred-s.StepsPerSec)/s.StepsPerSec)
	}
	b.Logf("ps-sync theta=%.3g max_rel_err=%.1f%% rel_rmse=%.1f%%", fit.Theta, 100*fit.Quality.MaxRelErr, 100*fit.Quality.RelRMSE)
}
