package simulator

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/caravan-nomad/caravan/internal/svgplot"
	"github.com/caravan-nomad/caravan/planner/simulator/packsim"
)

// Files `--packing --out DIR` writes.
const (
	FilePackingCSV  = "packing.csv"      // trace,mix,gpu_mode,load,policy,class,avg_jct_s,util_wait,util_all,allocated,slow_jobs,packs,unpacks,resizes,restarts,jobs
	FilePackingJSON = "packing.json"     // the same, one object per row and policy, with the targets' ratios
	FilePackingUtil = "packing-util.svg" // utilisation while jobs wait, one bar per policy, grouped by row
	FilePackingJCT  = "packing-jct.svg"  // mean JCT, one bar per policy, grouped by row
)

// packingFlags are --packing's options.
type packingFlags struct {
	mixes, modes, traces string
	seed                 uint64
	nodes, gpus, workers int
	out                  string
}

// parse checks the options, naming the flag of a bad one.
func (pf packingFlags) parse() ([]packsim.Mix, []bool, bool, bool, error) {
	var mixes []packsim.Mix
	for _, n := range strings.Split(pf.mixes, ",") {
		m, err := packsim.MixNamed(strings.TrimSpace(n))
		if err != nil {
			return nil, nil, false, false, fmt.Errorf("--packing-mixes: %w", err)
		}
		mixes = append(mixes, m)
	}
	var modes []bool
	for _, n := range strings.Split(pf.modes, ",") {
		switch strings.TrimSpace(n) {
		case "time-sliced":
			modes = append(modes, false)
		case "mps":
			modes = append(modes, true)
		default:
			return nil, nil, false, false, fmt.Errorf("--packing-modes: unknown mode %q (want time-sliced, mps)", n)
		}
	}
	philly, pollux := false, false
	for _, n := range strings.Split(pf.traces, ",") {
		switch strings.TrimSpace(n) {
		case "philly":
			philly = true
		case "pollux":
			pollux = true
		default:
			return nil, nil, false, false, fmt.Errorf("--packing-traces: unknown trace %q (want philly, pollux)", n)
		}
	}
	return mixes, modes, philly, pollux, nil
}

// runPacking is `simulate --packing`: the three-policy packing table on
// the Philly trace and the Pollux workloads (planner/POLICY.md, "Packing").
func runPacking(pf packingFlags, dir string, stdout, stderr io.Writer) int {
	mixes, modes, philly, pollux, err := pf.parse()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	tc := packsim.TableConfig{PhillyGPUs: max(pf.nodes, 1) * pf.gpus, PolluxGPUs: 16 * pf.gpus, Shares: 4,
		Mixes: mixes, Modes: modes, Seed: pf.seed, Workers: pf.workers, Progress: stderr}
	if philly {
		tc.PhillyPath = filepath.Join(dir, "philly-jobs.csv")
	}
	if pollux {
		tc.PolluxDir = dir
	}
	rows, err := packsim.Table(tc)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	fmt.Fprintf(stdout, "Packing (MODELLED interference, SYNTHETIC profiles, seed %d): philly on %d GPUs, pollux workloads on %d GPUs, %d shares per GPU, 60 s rounds\n",
		pf.seed, tc.PhillyGPUs, tc.PolluxGPUs, tc.Shares)
	packsim.PrintRows(stdout, rows)
	if pf.out != "" {
		if err := WritePacking(pf.out, rows); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s, %s, %s and %s to %s\n", FilePackingCSV, FilePackingJSON, FilePackingUtil, FilePackingJCT, pf.out)
	}
	return 0
}

// packingJSON is one row and policy in packing.json.
type packingJSON struct {
	Trace     string  `json:"trace"`
	Mix       string  `json:"mix"`
	GPUMode   string  `json:"gpu_mode"`
	Load      float64 `json:"load"`
	Policy    string  `json:"policy"`
	Class     string  `json:"class"`
	AvgJCT    float64 `json:"avg_jct_s"`
	UtilWait  float64 `json:"util_while_waiting"`
	UtilAll   float64 `json:"util_makespan"`
	Allocated float64 `json:"allocated_shares"`
	Slow      int     `json:"slow_jobs"`
	Packs     int     `json:"packs"`
	Unpacks   int     `json:"unpacks"`
	Resizes   int     `json:"resizes"`
	Restarts  int     `json:"restarts"`
	Jobs      int     `json:"jobs"`
	// The targets' ratios, on the introspective policy's entries.
	UtilVsWhole float64 `json:"util_vs_whole_gpu,omitempty"`
	JCTVsStatic float64 `json:"jct_vs_static,omitempty"`
	JCTVsWhole  float64 `json:"jct_vs_whole_gpu,omitempty"`
	Modelled    bool    `json:"modelled_interference"`
	Synthetic   bool    `json:"synthetic_profiles"`
}

// WritePacking writes the packing table's CSV, JSON and two bar charts
// into dir (created if needed).
func WritePacking(dir string, rows []packsim.Row) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	csvRows := [][]string{{"trace", "mix", "gpu_mode", "load", "policy", "class", "avg_jct_s", "util_wait", "util_all", "allocated",
		"slow_jobs", "packs", "unpacks", "resizes", "restarts", "jobs"}}
	var js []packingJSON
	util := svgplot.Bars{Title: "modelled GPU utilisation while jobs wait (MODELLED, SYNTHETIC profiles)", XLabel: "trace / mix / GPU mode",
		YLabel: "busy fraction of the cluster", Width: 960, Height: 420}
	jct := svgplot.Bars{Title: "mean JCT (MODELLED, SYNTHETIC profiles)", XLabel: "trace / mix / GPU mode", YLabel: "mean JCT (h)", Width: 960, Height: 420}
	vals := map[packsim.Policy][2][]float64{}
	for _, r := range rows {
		group := r.Trace + "/" + r.Mix + "/" + r.Mode()
		util.Groups, jct.Groups = append(util.Groups, group), append(jct.Groups, group)
		for _, p := range packsim.Policies {
			res := r.By[p]
			csvRows = append(csvRows, []string{r.Trace, r.Mix, r.Mode(), f(r.Load), string(p), p.Class(), f(res.AvgJCT), f(res.UtilWait),
				f(res.UtilAll), f(res.Allocated), strconv.Itoa(res.Slow), strconv.Itoa(res.Packs), strconv.Itoa(res.Unpacks),
				strconv.Itoa(res.Resizes), strconv.Itoa(res.Restarts), strconv.Itoa(res.Jobs)})
			e := packingJSON{Trace: r.Trace, Mix: r.Mix, GPUMode: r.Mode(), Load: r.Load, Policy: string(p), Class: p.Class(),
				AvgJCT: res.AvgJCT, UtilWait: res.UtilWait, UtilAll: res.UtilAll, Allocated: res.Allocated, Slow: res.Slow,
				Packs: res.Packs, Unpacks: res.Unpacks, Resizes: res.Resizes, Restarts: res.Restarts, Jobs: res.Jobs,
				Modelled: true, Synthetic: true}
			if p == packsim.Introspective {
				e.UtilVsWhole, e.JCTVsStatic, e.JCTVsWhole = r.UtilVsWhole(), r.JCTVsStatic(), r.JCTVsWhole()
			}
			js = append(js, e)
			v := vals[p]
			vals[p] = [2][]float64{append(v[0], res.UtilWait), append(v[1], res.AvgJCT/3600)}
		}
	}
	for _, p := range packsim.Policies {
		util.Add(string(p)+" ("+p.Class()+")", vals[p][0])
		jct.Add(string(p)+" ("+p.Class()+")", vals[p][1])
	}
	if err := writeCSV(dir, FilePackingCSV, csvRows); err != nil {
		return err
	}
	if err := writeJSON(dir, FilePackingJSON, js); err != nil {
		return err
	}
	if err := writeSVG(dir, FilePackingUtil, util.SVG()); err != nil {
		return err
	}
	return writeSVG(dir, FilePackingJCT, jct.SVG())
}
