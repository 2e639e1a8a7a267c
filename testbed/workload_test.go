package testbed

import (
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/workload"
)

func testCosts() map[string]ModelCost {
	return map[string]ModelCost{
		"small": {SecondsPerSample: 0.001, Steps: map[int]float64{64: 1000, 256: 400}},
		"big":   {SecondsPerSample: 0.004, Steps: map[int]float64{128: 4000}},
	}
}

func testTrace(n int) []workload.Job {
	var out []workload.Job
	for i := 0; i < n; i++ {
		app := "small"
		if i%3 == 0 {
			app = "big"
		}
		out = append(out, workload.Job{Name: app + "-" + string(rune('a'+i)), Time: float64(100 + 60*i), Application: app,
			Replicas: 1 + 8*(i%4), BatchSize: 64 << (i % 3)})
	}
	return out
}

func TestSampleWorkload(t *testing.T) {
	opts := DefaultSampleOptions()
	opts.Jobs = 6
	jobs, err := SampleWorkload(testTrace(10), testCosts(), opts)
	must.NoError(t, err)
	must.Len(t, 6, jobs)
	var total time.Duration
	for i, j := range jobs {
		must.StrHasPrefix(t, "tb-", j.Name)
		must.Between(t, 1, j.Workers, opts.GPUs)
		must.Positive(t, j.Steps)
		w := j.Work(opts.Batch)
		must.Between(t, opts.MinWork-time.Second, w, opts.MaxWork+time.Second)
		total += w
		if i > 0 {
			must.GreaterEq(t, jobs[i-1].Arrival, j.Arrival, must.Sprint("arrivals in order"))
		}
		// The compute per sample keeps the trace's ratio between models.
		if j.Model == "big" {
			must.Eq(t, 4*opts.MedianCompute, j.ComputePerSample)
		}
	}
	must.Eq(t, 0, jobs[0].Arrival)
	must.Eq(t, opts.Window, jobs[len(jobs)-1].Arrival)
	// Same seed, same workload; another seed, another one.
	again, err := SampleWorkload(testTrace(10), testCosts(), opts)
	must.NoError(t, err)
	must.Eq(t, jobs, again)
	opts.Seed = 99
	other, err := SampleWorkload(testTrace(10), testCosts(), opts)
	must.NoError(t, err)
	must.NotEq(t, jobs, other)
}

func TestSampleWorkloadScalesWork(t *testing.T) {
	opts := DefaultSampleOptions()
	opts.Jobs, opts.MinWork, opts.MaxWork, opts.Spread = 4, time.Millisecond, time.Hour, 1
	jobs, err := SampleWorkload(testTrace(4), testCosts(), opts)
	must.NoError(t, err)
	var total time.Duration
	for _, j := range jobs {
		total += j.Work(opts.Batch)
	}
	// Without clamping the one-worker work sums to TotalWork (to rounding).
	must.Between(t, opts.TotalWork-5*time.Second, total, opts.TotalWork+5*time.Second)
}

func TestSampleWorkloadErrors(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*SampleOptions)
		trace  []workload.Job
		want   string
	}{
		{"no jobs", func(o *SampleOptions) { o.Jobs = 0 }, testTrace(4), "jobs:"},
		{"too many", func(o *SampleOptions) { o.Jobs = 5 }, testTrace(4), "jobs: the trace has 4"},
		{"work", func(o *SampleOptions) { o.TotalWork = 0 }, testTrace(4), "work:"},
		{"min max", func(o *SampleOptions) { o.MinWork = time.Hour }, testTrace(4), "min/max work"},
		{"spread", func(o *SampleOptions) { o.Spread = 2 }, testTrace(4), "spread:"},
		{"unknown model", func(o *SampleOptions) { o.Jobs = 1 }, []workload.Job{{Name: "x", Application: "gpt"}}, `no trace for model "gpt"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultSampleOptions()
			tc.mutate(&opts)
			_, err := SampleWorkload(tc.trace, testCosts(), opts)
			must.Error(t, err)
			must.StrContains(t, err.Error(), tc.want)
		})
	}
}

func TestCostsFromTraces(t *testing.T) {
	traces := map[string]*workload.Trace{"m": {
		Placements: []workload.PlacementRow{
			{Placement: []int{2}, LocalBsz: 8, StepTime: 1},
			{Placement: []int{1}, LocalBsz: 64, StepTime: 0.64},
			{Placement: []int{1}, LocalBsz: 32, StepTime: 0.64},
		},
		Validation: map[int][]workload.ValidationRow{128: {{Iteration: 10}, {Iteration: 500}}},
	}}
	costs, err := CostsFromTraces(traces)
	must.NoError(t, err)
	must.Eq(t, 0.02, costs["m"].SecondsPerSample) // the smallest one-GPU batch
	must.Eq(t, 500, costs["m"].stepsFor(100))

	_, err = CostsFromTraces(map[string]*workload.Trace{"bad": {}})
	must.Error(t, err)
	must.True(t, strings.Contains(err.Error(), "bad"))
}
