package simulator

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/caravan-nomad/caravan/internal/svgplot"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
)

// Files --out writes (see planner/README.md, "Simulator output files").
const (
	FileJobsCSV    = "jobs.csv"        // policy,workload,job,application,submitted_s,completed_s,jct_s,restarts
	FileRunsJSON   = "runs.json"       // one summary per policy, with its jobs
	FileRoundsCSV  = "rounds.csv"      // policy,time_s,job,gpus (every interval a job held GPUs)
	FileUtilCSV    = "utilisation.csv" // policy,time_s,used_gpus,cluster_gpus,utilisation
	FileJCTCDF     = "jct-cdf.svg"     // JCT CDF, one curve per policy
	FileUtilSVG    = "utilisation.svg" // allocated share of the cluster over time, per policy
	FileSweepCSV   = "sweep.csv"       // policy,class,load,seed,avg_jct_s
	FileSweepJSON  = "sweep.json"      // per policy and load: class, mean, sample SD, per-seed values
	FileJCTByLoad  = "jct-by-load.svg" // average JCT by load, one bar per policy
	allocSVGPrefix = "allocation-"     // allocation-<policy>.svg: GPUs per job over time
)

// runJSON is one replay in runs.json.
type runJSON struct {
	Policy     string             `json:"policy"`
	Class      string             `json:"class"`
	Workload   string             `json:"workload"`
	AvgJCT     float64            `json:"avg_jct_s"`
	Makespan   float64            `json:"makespan_s"`
	GPUUtil    float64            `json:"gpu_utilisation"`
	GPUs       int                `json:"cluster_gpus"`
	Restarts   int                `json:"restarts"`
	Rounds     int                `json:"rounds"`
	DecideTime float64            `json:"policy_time_s"`
	Jobs       []engine.JobResult `json:"jobs"`
}

// WriteRun writes the per-job and per-round CSV and JSON of one or more
// replays of the same workload, and their figures, into dir (created if
// needed). Results need Config.Record for the per-round files.
func WriteRun(dir string, results []engine.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	var runs []runJSON
	jobs := [][]string{{"policy", "workload", "job", "application", "submitted_s", "completed_s", "jct_s", "restarts"}}
	rounds := [][]string{{"policy", "time_s", "job", "gpus"}}
	util := [][]string{{"policy", "time_s", "used_gpus", "cluster_gpus", "utilisation"}}
	cdf := svgplot.Chart{Title: "JCT CDF", XLabel: "job completion time (h)", YLabel: "fraction of jobs", Width: 720, Height: 400}
	utilChart := svgplot.Chart{Title: "GPU allocation over time", XLabel: "time (h)", YLabel: "allocated share of the cluster",
		Width: 720, Height: 360, YFixed: true, YMin: 0, YMax: 1}
	for _, r := range results {
		class := classOf(r.Policy)
		runs = append(runs, runJSON{Policy: r.Policy, Class: class, Workload: r.Workload, AvgJCT: r.AvgJCT, Makespan: r.Makespan,
			GPUUtil: r.GPUUtil, GPUs: r.GPUs, Restarts: r.Restarts, Rounds: r.Rounds, DecideTime: r.DecideTime.Seconds(), Jobs: r.Jobs})
		var jcts []float64
		for _, j := range r.Jobs {
			jobs = append(jobs, []string{r.Policy, r.Workload, j.Name, j.Application, f(j.Submitted), f(j.Completed), f(j.JCT), strconv.Itoa(j.Restarts)})
			jcts = append(jcts, j.JCT/3600)
		}
		label := r.Policy + " (" + class + ")"
		cdf.Add(svgplot.CDF(label, jcts))
		var ut, uv []float64
		for _, tr := range r.Trace {
			used := 0
			for i, g := range tr.GPUs {
				used += g
				if g > 0 && i < len(r.Jobs) {
					rounds = append(rounds, []string{r.Policy, f(tr.Time), r.Jobs[i].Name, strconv.Itoa(g)})
				}
			}
			u := float64(used) / float64(max(r.GPUs, 1))
			util = append(util, []string{r.Policy, f(tr.Time), strconv.Itoa(used), strconv.Itoa(r.GPUs), strconv.FormatFloat(u, 'f', 4, 64)})
			ut, uv = append(ut, tr.Time/3600), append(uv, u)
		}
		ut, uv = changes(ut, uv)
		utilChart.Add(svgplot.Series{Name: label, X: ut, Y: uv, Step: true})
		if len(r.Trace) > 0 {
			if err := writeSVG(dir, allocSVGPrefix+safeName(r.Policy)+".svg", allocationChart(r)); err != nil {
				return err
			}
		}
	}
	if err := writeCSV(dir, FileJobsCSV, jobs); err != nil {
		return err
	}
	if err := writeJSON(dir, FileRunsJSON, runs); err != nil {
		return err
	}
	if err := writeCSV(dir, FileRoundsCSV, rounds); err != nil {
		return err
	}
	if err := writeCSV(dir, FileUtilCSV, util); err != nil {
		return err
	}
	if err := writeSVG(dir, FileJCTCDF, cdf.SVG()); err != nil {
		return err
	}
	return writeSVG(dir, FileUtilSVG, utilChart.SVG())
}

// allocationChart draws each job's GPUs over time (a legend only for a
// handful of jobs).
func allocationChart(r engine.Result) []byte {
	c := svgplot.Chart{Title: "GPUs per job over time: " + r.Policy, XLabel: "time (h)", YLabel: "GPUs", Width: 720, Height: 360}
	for i, j := range r.Jobs {
		var xs, ys []float64
		for _, tr := range r.Trace {
			if i < len(tr.GPUs) {
				xs, ys = append(xs, tr.Time/3600), append(ys, float64(tr.GPUs[i]))
			}
		}
		xs, ys = changes(xs, ys)
		if len(xs) <= 2 && (len(ys) == 0 || ys[0] == 0) {
			continue // never held a GPU
		}
		name := ""
		if len(r.Jobs) <= 8 {
			name = j.Name
		}
		c.Add(svgplot.Series{Name: name, X: xs, Y: ys, Step: true})
	}
	return c.SVG()
}

// sweepJSON is one policy at one load in sweep.json.
type sweepJSON struct {
	Policy string    `json:"policy"`
	Class  string    `json:"class"`
	Load   float64   `json:"load"`
	Mean   float64   `json:"avg_jct_mean_s"`
	SD     float64   `json:"avg_jct_sd_s"`
	Seeds  []uint64  `json:"seeds"`
	JCT    []float64 `json:"avg_jct_s"`
}

// WriteSweep writes a sweep's CSV and JSON, and the average JCT by load.
func WriteSweep(dir string, cells []SweepCell, sw Sweep) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	rows := [][]string{{"policy", "class", "load", "seed", "avg_jct_s"}}
	var js []sweepJSON
	loads := append([]float64(nil), sw.Loads...)
	sort.Float64s(loads)
	means := map[string]map[float64]float64{}
	var names []string
	for _, c := range cells {
		for i, v := range c.JCT {
			seed := ""
			if i < len(sw.Seeds) {
				seed = strconv.FormatUint(sw.Seeds[i], 10)
			}
			rows = append(rows, []string{c.Policy, string(c.Class), f(c.Load), seed, f(v)})
		}
		m, sd := meanSD(c.JCT)
		if len(c.JCT) == 0 {
			m, sd = 0, 0 // JSON has no NaN
		}
		js = append(js, sweepJSON{Policy: c.Policy, Class: string(c.Class), Load: c.Load, Mean: m, SD: sd, Seeds: sw.Seeds, JCT: c.JCT})
		key := c.Policy + " (" + string(c.Class) + ")"
		if means[key] == nil {
			means[key] = map[float64]float64{}
			names = append(names, key)
		}
		means[key][c.Load] = m / 3600
	}
	b := svgplot.Bars{Title: "average JCT by load (mean over seeds)", XLabel: "job load", YLabel: "average JCT (h)", Width: 720, Height: 400}
	for _, l := range loads {
		b.Groups = append(b.Groups, strconv.FormatFloat(l, 'g', -1, 64))
	}
	for _, n := range names {
		vals := make([]float64, len(loads))
		for i, l := range loads {
			v, ok := means[n][l]
			if !ok {
				v = math.NaN()
			}
			vals[i] = v
		}
		b.Add(n, vals)
	}
	if err := writeCSV(dir, FileSweepCSV, rows); err != nil {
		return err
	}
	if err := writeJSON(dir, FileSweepJSON, js); err != nil {
		return err
	}
	return writeSVG(dir, FileJCTByLoad, b.SVG())
}

func classOf(name string) string {
	p, err := policy.New(name)
	if err != nil {
		return "unknown"
	}
	return string(p.Info().Class)
}

func f(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// safeName keeps a file name to letters, digits, '-', '_' and '.'.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

func writeCSV(dir, name string, rows [][]string) error {
	fh, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	w := csv.NewWriter(fh)
	_ = w.WriteAll(rows)
	if err := w.Error(); err != nil {
		fh.Close()
		return fmt.Errorf("--out: writing %s: %w", name, err)
	}
	return fh.Close()
}

func writeJSON(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("--out: encoding %s: %w", name, err)
	}
	return writeFile(dir, name, append(b, '\n'))
}

func writeSVG(dir, name string, b []byte) error { return writeFile(dir, name, b) }

func writeFile(dir, name string, b []byte) error {
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return nil
}

// changes keeps the points of a step series where the value changes, and
// the last one: the staircase it draws is the same.
func changes(xs, ys []float64) ([]float64, []float64) {
	if len(xs) < 3 {
		return xs, ys
	}
	ox, oy := []float64{xs[0]}, []float64{ys[0]}
	for i := 1; i < len(xs)-1; i++ {
		if ys[i] != oy[len(oy)-1] {
			ox, oy = append(ox, xs[i]), append(oy, ys[i])
		}
	}
	return append(ox, xs[len(xs)-1]), append(oy, ys[len(ys)-1])
}
