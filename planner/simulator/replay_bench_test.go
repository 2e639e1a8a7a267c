package simulator

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/caravan-nomad/caravan/planner/simulator/philly"
	"github.com/caravan-nomad/caravan/planner/simulator/pollux"
	"github.com/caravan-nomad/caravan/planner/simulator/pollux/polluxtest"
	"github.com/caravan-nomad/caravan/planner/workload"
	"github.com/shoenig/test/must"
)

// longEnv enables the replays of the full shared workloads in `go test`
// (they take a few minutes under -race, so they are off by default; the
// same replays run as benchmarks and through `simulate --table`).
const longEnv = "CARAVAN_LONG_TESTS"

func loadShared(tb testing.TB) (map[string][]workload.Job, map[string]*pollux.Application, map[string]map[string]float64) {
	tb.Helper()
	dir := polluxtest.Dir(tb)
	apps, err := pollux.LoadApplications(dir)
	must.NoError(tb, err)
	files, _ := filepath.Glob(filepath.Join(dir, "workloads", "*.csv"))
	jobs := map[string][]workload.Job{}
	for _, f := range files {
		js, err := workload.ReadJobs(f, pollux.Known(apps))
		must.NoError(tb, err)
		jobs[strings.TrimSuffix(filepath.Base(f), ".csv")] = js
	}
	pub, err := workload.ReadPublished(filepath.Join(dir, "published-avg-jct.csv"))
	must.NoError(tb, err)
	published := map[string]map[string]float64{}
	for _, p := range pub {
		if published[p.Policy] == nil {
			published[p.Policy] = map[string]float64{}
		}
		published[p.Policy][p.Workload] = p.AvgJCT
	}
	return jobs, apps, published
}

// TestFidelityAgainstPublished replays the shared workloads: our Tiresias,
// Optimus+Oracle and Pollux port must land within 10% of the published
// average JCT on each. The online goodput policy's standing against Pollux
// is logged (POLICY.md reports it), not asserted: it is a result, not a
// fidelity property.
func TestFidelityAgainstPublished(t *testing.T) {
	if os.Getenv(longEnv) == "" {
		t.Skip("set " + longEnv + "=1 to replay the shared workloads")
	}
	jobs, apps, published := loadShared(t)
	for _, p := range []string{"tiresias", "optimus", "pollux", "goodput"} {
		for w, js := range jobs {
			res, err := pollux.Simulate(engine.Config{}, p, js, apps)
			must.NoError(t, err)
			ref := published[publishedFor[p]][w]
			t.Logf("%s %s: %.0f s, published %s %.0f s (%+.1f%%)", p, w, res.AvgJCT, publishedFor[p], ref, 100*(res.AvgJCT/ref-1))
			if p != "goodput" {
				must.True(t, res.AvgJCT > 0.9*ref && res.AvgJCT < 1.1*ref,
					must.Sprintf("%s on %s: %.0f s vs published %.0f s", p, w, res.AvgJCT, ref))
			}
		}
	}
}

// BenchmarkReplay* replay the shared workloads and report the average JCT
// (hours) next to the wall time.
func benchReplay(b *testing.B, policyName string) {
	jobs, apps, _ := loadShared(b)
	if testing.Short() { // `make bench-smoke`: one workload's first jobs
		first := slices.Sorted(maps.Keys(jobs))[0]
		jobs = map[string][]workload.Job{first: jobs[first][:min(len(jobs[first]), replayShortJobs)]}
	}
	b.ResetTimer()
	for b.Loop() {
		sum := 0.0
		for _, js := range jobs {
			res, err := pollux.Simulate(engine.Config{}, policyName, js, apps)
			if err != nil {
				b.Fatal(err)
			}
			sum += res.AvgJCT
		}
		b.ReportMetric(sum/float64(len(jobs))/3600, "avg_jct_h")
	}
}

func BenchmarkReplayTiresias(b *testing.B) { benchReplay(b, "tiresias") }
func BenchmarkReplayOptimus(b *testing.B)  { benchReplay(b, "optimus") }
func BenchmarkReplayGoodput(b *testing.B)  { benchReplay(b, "goodput") }
func BenchmarkReplayPollux(b *testing.B)   { benchReplay(b, "pollux") }

// BenchmarkReplayPhilly replays the full philly-jobs.csv under the best
// policy (about a minute) and reports peak resident memory. With -short
// (`make bench-smoke`) it replays the trace's first phillyShortJobs jobs.
func BenchmarkReplayPhilly(b *testing.B) {
	dir := polluxtest.Dir(b)
	trace := filepath.Join(dir, "philly-jobs.csv")
	if testing.Short() {
		trace = traceHead(b, trace, phillyShortJobs)
	}
	for b.Loop() {
		rep, err := philly.ReplayPhilly(engine.Config{Nodes: 128}, "goodput", trace)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(rep.PeakRSSBytes)/(1<<20), "peak_rss_MiB")
		b.ReportMetric(rep.AvgJCT/3600, "avg_jct_h")
	}
}

// replayShortJobs is how many jobs of one workload a -short replay takes.
const replayShortJobs = 40

// phillyShortJobs is how much of the Philly trace a -short replay takes.
const phillyShortJobs = 2000

// traceHead writes the header and first n jobs of a trace CSV to a
// temporary file and returns its path.
func traceHead(tb testing.TB, path string, n int) string {
	tb.Helper()
	data, err := os.ReadFile(path)
	must.NoError(tb, err)
	lines := strings.SplitAfterN(string(data), "\n", n+2)
	head := filepath.Join(tb.TempDir(), filepath.Base(path))
	must.NoError(tb, os.WriteFile(head, []byte(strings.Join(lines[:min(len(lines), n+1)], "")), 0o644))
	return head
}
