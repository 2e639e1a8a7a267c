package testbed

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

var cluster4 = Cluster{Nodes: 2, GPUsPerNode: 2, SharesPerGPU: 4, WorkerShares: 4}

// history is a job that queued 10 s, ran one worker from 10 to 70 s and a
// second from 40 to 70 s, checkpointed twice (the second event seen twice,
// as every poll re-reads it) and was restored once.
func history() JobRecord {
	saved := func(s int, b string) Event {
		return Event{Time: at(s), Type: "Driver", Message: "Checkpoint saved (periodic): generation 1, 1.0 KiB", Details: map[string]string{"bytes": b}}
	}
	return JobRecord{Name: "tb-a", Submitted: at(0), Dead: true, Allocs: []AllocRecord{
		{ID: "ps1", Group: "ps", Started: at(5), Finished: at(72), Events: []Event{
			saved(30, "1024"), saved(60, "2048"), saved(60, "2048"),
			{Time: at(35), Type: "Driver", Message: "Checkpoint restored: generation 1"},
		}},
		{ID: "w1", Group: "worker", Started: at(10), Finished: at(70)},
		{ID: "w2", Group: "worker", Started: at(40), Finished: at(70)},
	}}
}

func TestJobMetricsOf(t *testing.T) {
	cases := []struct {
		name string
		rec  func() JobRecord
		want JobMetrics
	}{
		{"finished", history, JobMetrics{Name: "tb-a", Submitted: at(0), Started: at(10), Finished: at(72), JCT: 72 * time.Second,
			Queued: 10 * time.Second, WorkerSeconds: 90, Restarts: 1, Checkpoints: 2, CheckpointBytes: 3072, MaxCheckpointBytes: 2048,
			Allocs: 3, MaxWorkers: 2}},
		{"running", func() JobRecord {
			r := history()
			r.Dead = false
			r.Allocs[1].Finished, r.Allocs[2].Finished = time.Time{}, time.Time{}
			return r
		}, JobMetrics{Name: "tb-a", Submitted: at(0), Started: at(10), Queued: 10 * time.Second, WorkerSeconds: 90 + 60,
			Restarts: 1, Checkpoints: 2, CheckpointBytes: 3072, MaxCheckpointBytes: 2048, Allocs: 3, MaxWorkers: 2}},
		{"queued", func() JobRecord { return JobRecord{Name: "tb-q", Submitted: at(0)} },
			JobMetrics{Name: "tb-q", Submitted: at(0)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, JobMetricsOf(tc.rec(), at(100)))
		})
	}
}

func TestTimelineAndSummary(t *testing.T) {
	a := history()
	b := JobRecord{Name: "tb-b", Submitted: at(20), Dead: true, Allocs: []AllocRecord{
		{ID: "w", Group: "worker", Started: at(70), Finished: at(100)},
	}}
	tl := Timeline([]JobRecord{a, b}, cluster4, at(0), at(100), 30*time.Second)
	must.Eq(t, []Point{
		{At: 0, Queued: 1},
		{At: 30 * time.Second, Running: 1, Queued: 1, Workers: 1, GPUs: 1, Util: 0.25},
		{At: 60 * time.Second, Running: 1, Queued: 1, Workers: 2, GPUs: 2, Util: 0.5},
		{At: 90 * time.Second, Running: 1, Finished: 1, Workers: 1, GPUs: 1, Util: 0.25},
	}, tl)

	ms := []JobMetrics{JobMetricsOf(a, at(100)), JobMetricsOf(b, at(100))}
	s := Summarize("optimus", ms, cluster4)
	must.Eq(t, Summary{Policy: "optimus", Jobs: 2, Finished: 2, AvgJCT: (72 + 80) * time.Second / 2, Makespan: 100 * time.Second,
		Util: 0.3, Restarts: 1, Checkpoints: 2, CheckpointBytes: 3072, MaxCheckpointBytes: 2048}, s)
}

func TestMergeEvents(t *testing.T) {
	a := []Event{{Time: at(1), Message: "x"}, {Time: at(3), Message: "y"}}
	b := []Event{{Time: at(3), Message: "y"}, {Time: at(2), Message: "z"}}
	must.Eq(t, []Event{{Time: at(1), Message: "x"}, {Time: at(2), Message: "z"}, {Time: at(3), Message: "y"}}, mergeEvents(a, b))
}

func testResults() *Results {
	a, b := history(), history()
	b.Name = "tb-a"
	b.Allocs[1].Finished, b.Allocs[2].Finished = at(130), at(130)
	b.Allocs[0].Finished = at(144)
	runs := []*Run{
		{Policy: Static, Start: at(0), End: at(144), Records: []JobRecord{b}},
		{Policy: "optimus", Start: at(0), End: at(72), Records: []JobRecord{a}},
	}
	for _, r := range runs {
		for _, rec := range r.Records {
			r.Jobs = append(r.Jobs, JobMetricsOf(rec, r.End))
		}
		r.Summary = Summarize(r.Policy, r.Jobs, cluster4)
	}
	return &Results{Cluster: cluster4, TimelineStep: 30 * time.Second, Runs: runs,
		Workload: []Job{{Name: "tb-a", Model: "cifar10", Workers: 1, Steps: 100, ComputePerSample: 2 * time.Millisecond}},
		Fidelity: []Fidelity{
			{Policy: Static, SimPolicy: "fifo", LiveAvgJCT: 144 * time.Second, SimAvgJCT: 150 * time.Second, Error: 6.0 / 144,
				JobSim: []time.Duration{150 * time.Second}, JobError: []float64{6.0 / 144}},
			{Policy: "optimus", SimPolicy: "optimus", LiveAvgJCT: 72 * time.Second, SimAvgJCT: 60 * time.Second, Error: -12.0 / 72,
				JobSim: []time.Duration{60 * time.Second}, JobError: []float64{-12.0 / 72}},
		}}
}

func TestPrintTable(t *testing.T) {
	var buf bytes.Buffer
	PrintTable(&buf, testResults())
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	must.Len(t, 3, lines)
	must.StrContains(t, lines[1], "static")
	must.StrContains(t, lines[1], "2m24s")
	must.StrContains(t, lines[1], "1.00x")
	must.StrContains(t, lines[2], "optimus")
	must.StrContains(t, lines[2], "0.50x")
	must.StrContains(t, lines[2], "-16.7%")
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	must.NoError(t, Write(dir, testResults()))
	read := func(name string) [][]string {
		f, err := os.Open(filepath.Join(dir, name))
		must.NoError(t, err)
		defer f.Close()
		rows, err := csv.NewReader(f).ReadAll()
		must.NoError(t, err)
		return rows
	}
	sum := read("summary.csv")
	must.Len(t, 3, sum)
	must.Eq(t, []string{"optimus", "optimus", "1", "1", "72.000", "72.000"}, sum[2][:6])
	must.Eq(t, "0.500", sum[2][11]) // jct_vs_static
	jobs := read("jobs.csv")
	must.Len(t, 3, jobs)
	must.Eq(t, "jct_s", jobs[0][10])
	must.Eq(t, "144.000", jobs[1][10])
	must.Eq(t, "-0.167", jobs[2][18])
	tl := read("timeline.csv")
	must.Eq(t, []string{"policy", "t_s", "running", "queued", "finished", "workers", "gpus", "gpu_util"}, tl[0])
	must.Len(t, 1+5+3, tl) // 0..144 s and 0..72 s every 30 s
	must.Len(t, 2, read("workload.csv"))
	_, err := os.Stat(filepath.Join(dir, "results.json"))
	must.NoError(t, err)
}
