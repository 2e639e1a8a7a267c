package simulator

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/caravan-nomad/caravan/planner/simulator/pollux"
	"github.com/caravan-nomad/caravan/planner/workload"
)

// Sweep replays generated workloads at several job loads and seeds.
type Sweep struct {
	Loads    []float64 // job load: a workload holds round(BaseJobs x load) jobs in the same window
	Seeds    []uint64
	Policies []string
	BaseJobs int // jobs at load 1.0; 0 means 160, the artifact's
	Start    int // first hour of the day sampled
	Hours    int // hours sampled; 0 means 8
	Workers  int // replays run in parallel; 0 means 1
}

// SweepCell is one policy at one load: the average JCT (seconds) per seed,
// in Seeds order.
type SweepCell struct {
	Policy string
	Class  policy.Class
	Load   float64
	JCT    []float64
}

// meanSD is the mean and sample standard deviation.
func meanSD(x []float64) (float64, float64) {
	if len(x) == 0 {
		return math.NaN(), math.NaN()
	}
	s := 0.0
	for _, v := range x {
		s += v
	}
	m := s / float64(len(x))
	if len(x) < 2 {
		return m, 0
	}
	ss := 0.0
	for _, v := range x {
		ss += (v - m) * (v - m)
	}
	return m, math.Sqrt(ss / float64(len(x)-1))
}

// RunSweep generates every (load, seed) workload from philly-jobs.csv and
// replays it under every policy.
func RunSweep(cfg engine.Config, dataDir string, sw Sweep, progress io.Writer) ([]SweepCell, error) {
	if sw.BaseJobs <= 0 {
		sw.BaseJobs = 160
	}
	if sw.Hours <= 0 {
		sw.Hours = 8
	}
	sw.Workers = max(sw.Workers, 1)
	apps, err := pollux.LoadApplications(dataDir)
	if err != nil {
		return nil, err
	}
	trace, err := workload.ReadPhilly(filepath.Join(dataDir, "philly-jobs.csv"))
	if err != nil {
		return nil, err
	}
	infos := map[string]policy.Info{}
	for _, p := range sw.Policies {
		pol, err := policy.New(p)
		if err != nil {
			return nil, err
		}
		infos[p] = pol.Info()
	}
	cells := make([]SweepCell, 0, len(sw.Loads)*len(sw.Policies))
	type task struct{ cell, seed int }
	var tasks []task
	wls := map[[2]int][]workload.Job{}
	for li, load := range sw.Loads {
		n := int(math.Round(float64(sw.BaseJobs) * load))
		for si, seed := range sw.Seeds {
			jobs, err := pollux.Generate(trace, apps, n, sw.Start, sw.Hours, seed)
			if err != nil {
				return nil, fmt.Errorf("load %g seed %d: %w", load, seed, err)
			}
			wls[[2]int{li, si}] = jobs
		}
		for _, p := range sw.Policies {
			cells = append(cells, SweepCell{Policy: p, Class: infos[p].Class, Load: load, JCT: make([]float64, len(sw.Seeds))})
			for si := range sw.Seeds {
				tasks = append(tasks, task{cell: len(cells) - 1, seed: si})
			}
		}
	}
	loadIndex := map[float64]int{}
	for li, l := range sw.Loads {
		loadIndex[l] = li
	}
	var mu sync.Mutex
	var firstErr error
	ch := make(chan task)
	var wg sync.WaitGroup
	for w := 0; w < sw.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range ch {
				c := &cells[t.cell]
				res, err := pollux.Simulate(cfg, c.Policy, wls[[2]int{loadIndex[c.Load], t.seed}], apps)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("%s at load %g seed %d: %w", c.Policy, c.Load, sw.Seeds[t.seed], err)
				}
				c.JCT[t.seed] = res.AvgJCT
				if progress != nil && err == nil {
					fmt.Fprintf(progress, "%-15s load %.1f seed %3d: avg JCT %7.0f s, %d rounds, decide %s\n",
						c.Policy, c.Load, sw.Seeds[t.seed], res.AvgJCT, res.Rounds, res.DecideTime.Round(1e6))
				}
				mu.Unlock()
			}
		}()
	}
	for _, t := range tasks {
		ch <- t
	}
	close(ch)
	wg.Wait()
	return cells, firstErr
}

// PrintSweep writes mean +- sample SD of the average JCT (hours) per policy
// and load, and each policy's per-seed ratio to ref (mean [min, max]).
func PrintSweep(w io.Writer, cells []SweepCell, sw Sweep, ref string) {
	var loads []float64
	byKey := map[string]map[float64]SweepCell{}
	var names []string
	for _, c := range cells {
		if byKey[c.Policy] == nil {
			byKey[c.Policy] = map[float64]SweepCell{}
			names = append(names, c.Policy)
		}
		byKey[c.Policy][c.Load] = c
	}
	loads = append(loads, sw.Loads...)
	sort.Float64s(loads)
	seeds := make([]string, len(sw.Seeds))
	for i, s := range sw.Seeds {
		seeds[i] = strconv.FormatUint(s, 10)
	}
	fmt.Fprintf(w, "Average JCT (hours), mean +- sample SD over seeds %s; generated workloads (%d jobs x load, %d h window from %02d:00)\n",
		strings.Join(seeds, ","), max(sw.BaseJobs, 160), max(sw.Hours, 8), sw.Start)
	fmt.Fprintf(w, "%-16s %-9s", "policy", "class")
	for _, l := range loads {
		fmt.Fprintf(w, " %17s", fmt.Sprintf("load %.1f", l))
	}
	fmt.Fprintln(w)
	for _, n := range names {
		c0 := byKey[n][loads[0]]
		fmt.Fprintf(w, "%-16s %-9s", n, c0.Class)
		for _, l := range loads {
			m, sd := meanSD(byKey[n][l].JCT)
			fmt.Fprintf(w, " %17s", fmt.Sprintf("%.3f +- %.3f", m/3600, sd/3600))
		}
		fmt.Fprintln(w)
	}
	if byKey[ref] == nil {
		return
	}
	fmt.Fprintf(w, "\nRatio to %s per seed: mean [min, max]\n", ref)
	for _, n := range names {
		if n == ref {
			continue
		}
		fmt.Fprintf(w, "%-16s %-9s", n, byKey[n][loads[0]].Class)
		for _, l := range loads {
			a, b := byKey[n][l].JCT, byKey[ref][l].JCT
			r := make([]float64, len(a))
			lo, hi := math.Inf(1), math.Inf(-1)
			for i := range a {
				r[i] = a[i] / b[i]
				lo, hi = math.Min(lo, r[i]), math.Max(hi, r[i])
			}
			m, _ := meanSD(r)
			fmt.Fprintf(w, " %17s", fmt.Sprintf("%.3f [%.2f,%.2f]", m, lo, hi))
		}
		fmt.Fprintln(w)
	}
}

// parseLoads parses "0.5,1,1.5,2".
func parseLoads(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("--loads: %q is not a positive number", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseSeeds parses "11-15" or "3,7,9".
func parseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if lo, hi, ok := strings.Cut(f, "-"); ok {
			a, err1 := strconv.ParseUint(lo, 10, 64)
			b, err2 := strconv.ParseUint(hi, 10, 64)
			if err1 != nil || err2 != nil || b < a {
				return nil, fmt.Errorf("--seeds: %q is not a range like 11-15", f)
			}
			for v := a; v <= b; v++ {
				out = append(out, v)
			}
			continue
		}
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds: %q is not a seed", f)
		}
		out = append(out, v)
	}
	return out, nil
}
