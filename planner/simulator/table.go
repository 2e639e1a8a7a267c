package simulator

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/caravan-nomad/caravan/planner/simulator/pollux"
	"github.com/caravan-nomad/caravan/planner/workload"
)

// TableRow is one policy's results across workloads next to the published
// figure for the artifact policy it corresponds to.
type TableRow struct {
	Policy    string
	Published string // published policy compared against ("" if none)
	Ours      map[string]float64
	Paper     map[string]float64
}

// publishedFor maps our policy names to the artifact's published policy.
var publishedFor = map[string]string{"tiresias": "tiresias", "optimus": "optimus", "goodput": "pollux", "goodput-oracle": "pollux", "pollux": "pollux"}

// RunTable replays every workload under every policy.
func RunTable(cfg engine.Config, dataDir string, policies []string, progress io.Writer) ([]TableRow, []string, error) {
	apps, err := pollux.LoadApplications(dataDir)
	if err != nil {
		return nil, nil, err
	}
	files, err := filepath.Glob(filepath.Join(dataDir, "workloads", "*.csv"))
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(files)
	pub, err := workload.ReadPublished(filepath.Join(dataDir, "published-avg-jct.csv"))
	if err != nil {
		return nil, nil, err
	}
	var names []string
	jobsByName := map[string][]workload.Job{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".csv")
		jobs, err := workload.ReadJobs(f, pollux.Known(apps))
		if err != nil {
			return nil, nil, err
		}
		names = append(names, name)
		jobsByName[name] = jobs
	}
	var rows []TableRow
	for _, p := range policies {
		row := TableRow{Policy: p, Published: publishedFor[p], Ours: map[string]float64{}, Paper: map[string]float64{}}
		for _, w := range names {
			res, err := pollux.Simulate(cfg, p, jobsByName[w], apps)
			if err != nil {
				return nil, nil, fmt.Errorf("%s on %s: %w", p, w, err)
			}
			row.Ours[w] = res.AvgJCT
			if progress != nil {
				fmt.Fprintf(progress, "%-9s %-11s avg JCT %7.0f s  makespan %7.0f s  util %.2f  restarts %d  decide %s\n",
					p, w, res.AvgJCT, res.Makespan, res.GPUUtil, res.Restarts, res.DecideTime.Round(1e6))
			}
		}
		for _, r := range pub {
			if r.Policy == row.Published {
				row.Paper[r.Workload] = r.AvgJCT
			}
		}
		rows = append(rows, row)
	}
	return rows, names, nil
}

// PrintTable writes the side-by-side table (hours) and each policy's
// deviation from its published counterpart.
func PrintTable(w io.Writer, rows []TableRow, names []string) {
	fmt.Fprintf(w, "Average JCT (hours), 16 nodes x 4 GPUs, 60 s interval; published = Pollux OSDI'21 artifact\n")
	fmt.Fprintf(w, "%-24s", "policy")
	for _, n := range names {
		fmt.Fprintf(w, " %11s", n)
	}
	fmt.Fprintf(w, " %9s\n", "mean")
	for _, r := range rows {
		fmt.Fprintf(w, "%-24s", r.Policy)
		mean := 0.0
		for _, n := range names {
			fmt.Fprintf(w, " %11.3f", r.Ours[n]/3600)
			mean += r.Ours[n] / 3600
		}
		fmt.Fprintf(w, " %9.3f\n", mean/float64(len(names)))
		have := 0
		for _, n := range names {
			if _, ok := r.Paper[n]; ok {
				have++
			}
		}
		if r.Published == "" || have == 0 {
			continue
		}
		fmt.Fprintf(w, "%-24s", "  published "+r.Published)
		mean = 0
		for _, n := range names {
			if v, ok := r.Paper[n]; ok {
				fmt.Fprintf(w, " %11.3f", v/3600)
				mean += v / 3600
			} else {
				fmt.Fprintf(w, " %11s", "-")
			}
		}
		if have == len(names) {
			fmt.Fprintf(w, " %9.3f", mean/float64(len(names)))
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "%-24s", "  ours vs published")
		for _, n := range names {
			if v, ok := r.Paper[n]; ok {
				fmt.Fprintf(w, " %+10.1f%%", 100*(r.Ours[n]/v-1))
			} else {
				fmt.Fprintf(w, " %11s", "-")
			}
		}
		fmt.Fprintln(w)
	}
}
