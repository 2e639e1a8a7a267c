package testbed

import (
	"math"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// fidelityRuns: a static run whose two jobs take 150 ms a step, and an
// optimus run whose first job, never resized, takes 250 ms a step and
// whose second grew to two workers (a step time that says nothing of one
// worker's).
func fidelityRuns() ([]Job, *Run, *Run) {
	jobs := []Job{
		{Name: "a", Workers: 1, Steps: 100, ComputePerSample: time.Millisecond},
		{Name: "b", Workers: 1, Steps: 100, ComputePerSample: time.Millisecond},
	}
	job := func(queued, perStep time.Duration, maxWorkers int) JobMetrics {
		start := t0.Add(queued)
		end := start.Add(100 * perStep)
		return JobMetrics{Submitted: t0, Started: start, Finished: end, Queued: queued, JCT: end.Sub(t0), MaxWorkers: maxWorkers}
	}
	static := &Run{Policy: Static, Jobs: []JobMetrics{job(time.Second, 150*time.Millisecond, 1), job(time.Second, 150*time.Millisecond, 1)}}
	planned := &Run{Policy: "optimus", Jobs: []JobMetrics{job(3*time.Second, 250*time.Millisecond, 1), job(3*time.Second, 90*time.Millisecond, 2)}}
	return jobs, static, planned
}

func TestLeaveOneOut_CalibratesOnTheOtherRuns(t *testing.T) {
	jobs, static, planned := fidelityRuns()
	runs := []*Run{static, planned}
	x := stepJob(jobs[0], 1).StepTime(1, 0)
	near := func(want float64, got time.Duration) {
		t.Helper()
		must.True(t, math.Abs(got.Seconds()-want) < 1e-6, must.Sprintf("got %s, want %.6f s", got, want))
	}

	// The static run is predicted from the optimus run's unresized job only.
	cal, ok := LeaveOneOut(runs, jobs, static)
	must.True(t, ok)
	must.Eq(t, 1, cal.Points)
	near(0.25-x, cal.StepOverhead)
	near(3, cal.StartDelay)

	// The optimus run from the static run's two jobs.
	cal, ok = LeaveOneOut(runs, jobs, planned)
	must.True(t, ok)
	must.Eq(t, 2, cal.Points)
	near(0.15-x, cal.StepOverhead)
	near(1, cal.StartDelay)

	// A run alone has nothing to be predicted from.
	_, ok = LeaveOneOut([]*Run{static}, jobs, static)
	must.False(t, ok)
}

func TestPredict_MarksInSampleFits(t *testing.T) {
	jobs, static, planned := fidelityRuns()
	cfg := DefaultConfig()
	fid, err := Predict([]*Run{static}, jobs, cfg)
	must.NoError(t, err)
	must.Len(t, 1, fid)
	must.True(t, fid[0].InSample)
	must.Eq(t, "in-sample fit check", fid[0].CalibrationLabel())
	must.Eq(t, 2, fid[0].Calibration.Points)

	fid, err = Predict([]*Run{static, planned}, jobs, cfg)
	must.NoError(t, err)
	for _, f := range fid {
		must.False(t, f.InSample, must.Sprintf("%s", f.Policy))
		must.Eq(t, "out of sample", f.CalibrationLabel())
	}
	must.Eq(t, 1, fid[0].Calibration.Points) // static: the optimus run's one unresized job
	must.Eq(t, 2, fid[1].Calibration.Points)
}
