package packsim

import (
	"fmt"
	"io"
	"math"
	"sync"
	"time"
)

// Row is one trace under one profile mix and GPU mode, every policy.
type Row struct {
	Trace string // "philly" or "pollux" (the four workloads together)
	Mix   string
	MPS   bool
	Load  float64 // offered GPU-seconds / (cluster GPUs x arrival window) at whole GPUs
	By    map[Policy]Result
}

// UtilVsWhole is the introspective policy's utilisation while jobs wait
// over the whole-GPU policy's (target >= 1.3).
func (r Row) UtilVsWhole() float64 {
	return r.By[Introspective].UtilWait / r.By[WholeGPU].UtilWait
}

// JCTVsStatic is the introspective policy's mean JCT over static
// packing's (target <= 0.8).
func (r Row) JCTVsStatic() float64 { return r.By[Introspective].AvgJCT / r.By[Static].AvgJCT }

// JCTVsWhole is the introspective policy's mean JCT over the whole-GPU
// policy's (all-GPU-bound mix: target <= 1.05).
func (r Row) JCTVsWhole() float64 { return r.By[Introspective].AvgJCT / r.By[WholeGPU].AvgJCT }

// Mode is the GPUs' sharing mode in words.
func (r Row) Mode() string {
	if r.MPS {
		return "mps"
	}
	return "time-sliced"
}

// Merge sums replays of several workloads into one result: JCT over every
// job, utilisation weighted by time.
func Merge(rs []Result) Result {
	if len(rs) == 0 {
		return Result{}
	}
	out := Result{Policy: rs[0].Policy, Mix: rs[0].Mix, MPS: rs[0].MPS, GPUs: rs[0].GPUs}
	var span, wait float64
	for _, r := range rs {
		out.Jobs += r.Jobs
		out.JCTs = append(out.JCTs, r.JCTs...)
		out.Makespan += r.Makespan
		out.UtilAll += r.UtilAll * r.Makespan
		out.Allocated += r.Allocated * r.Makespan
		out.UtilWait += r.UtilWait * r.waitTime
		span += r.Makespan
		wait += r.waitTime
		out.Slow += r.Slow
		out.Packs += r.Packs
		out.Unpacks += r.Unpacks
		out.Resizes += r.Resizes
		out.Restarts += r.Restarts
		out.Rounds += r.Rounds
		out.DecideTime += r.DecideTime
	}
	for _, j := range out.JCTs {
		out.AvgJCT += j / float64(len(out.JCTs))
	}
	out.UtilAll /= math.Max(span, 1e-9)
	out.Allocated /= math.Max(span, 1e-9)
	out.UtilWait /= math.Max(wait, 1e-9)
	out.waitTime, out.WaitShare = wait, wait/math.Max(span, 1e-9)
	out.Makespan /= float64(len(rs))
	return out
}

// Load is the offered load of specs on gpus whole GPUs: their GPU-seconds
// over the cluster's GPU-seconds in the window from the first to the last
// submission.
func Load(specs []Spec, gpus int) float64 {
	lo, hi, work := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range specs {
		lo, hi = math.Min(lo, s.Submit), math.Max(hi, s.Submit)
		work += s.Work * float64(s.Workers)
	}
	return work / (math.Max(hi-lo, 1) * float64(gpus))
}

// PrintRows writes the three-policy table: per row, each policy's mean
// JCT (hours), modelled utilisation while jobs wait and over the makespan,
// allocated shares, slow jobs, packs, unpacks and resizes; and the three
// targets' ratios on the introspective line.
func PrintRows(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "%-6s %-9s %-11s %4s  %-13s %-8s %8s %6s %5s %5s %5s %6s %6s %6s  %7s %6s %7s\n",
		"trace", "mix", "gpus", "load", "policy", "class", "jct_h", "u_wait", "u_all", "alloc", "slow", "packs", "unpack", "resize",
		"u/whole", "j/stat", "j/whole")
	for _, r := range rows {
		for k, p := range Policies {
			res := r.By[p]
			fmt.Fprintf(w, "%-6s %-9s %-11s %4.2f  %-13s %-8s %8.3f %6.3f %5.3f %5.3f %5d %6d %6d %6d",
				r.Trace, r.Mix, r.Mode(), r.Load, p, p.Class(), res.AvgJCT/3600, res.UtilWait, res.UtilAll, res.Allocated,
				res.Slow, res.Packs, res.Unpacks, res.Resizes)
			if k == len(Policies)-1 {
				fmt.Fprintf(w, "  %7.2f %6.2f %7.2f", r.UtilVsWhole(), r.JCTVsStatic(), r.JCTVsWhole())
			}
			fmt.Fprintln(w)
		}
	}
}

// TableConfig says what Table replays.
type TableConfig struct {
	// PhillyPath is philly-jobs.csv and PolluxDir the Pollux data directory
	// (its workloads/ and traces/); an empty one is skipped.
	PhillyPath, PolluxDir  string
	PhillyGPUs, PolluxGPUs int
	Shares                 int
	Mixes                  []Mix
	Modes                  []bool // MPS off, on
	Seed                   uint64
	Workers                int       // replays in parallel
	Progress               io.Writer // one line per replay, when set
}

type task struct {
	row   int
	pol   Policy
	specs [][]Spec
	cfg   Config
}

// Table replays every trace under every mix and mode with every policy.
func Table(tc TableConfig) ([]Row, error) {
	rows, tasks, err := planTable(tc)
	if err != nil {
		return nil, err
	}
	results, errs := runTasks(tc, rows, tasks)
	for k, t := range tasks {
		if errs[k] != nil {
			return nil, errs[k]
		}
		rows[t.row].By[t.pol] = results[k]
	}
	return rows, nil
}

// traceSet is one trace's workloads under one mix, on its cluster size.
type traceSet struct {
	name  string
	gpus  int
	specs [][]Spec
}

// traceSets reads the configured traces under mix.
func traceSets(tc TableConfig, mix Mix) ([]traceSet, error) {
	var sets []traceSet
	if tc.PhillyPath != "" {
		sp, err := PhillySpecs(tc.PhillyPath, mix, tc.Seed, tc.Shares)
		if err != nil {
			return nil, err
		}
		sets = append(sets, traceSet{"philly", tc.PhillyGPUs, [][]Spec{sp}})
	}
	if tc.PolluxDir != "" {
		ws, err := PolluxSpecs(tc.PolluxDir, mix, tc.Seed, tc.Shares)
		if err != nil {
			return nil, err
		}
		var all [][]Spec
		for _, w := range ws {
			all = append(all, w.Specs)
		}
		sets = append(sets, traceSet{"pollux", tc.PolluxGPUs, all})
	}
	return sets, nil
}

// planTable lays out the table's rows (one per trace, mix and mode) and
// one replay task per row and policy.
func planTable(tc TableConfig) ([]Row, []task, error) {
	var rows []Row
	var tasks []task
	for _, mix := range tc.Mixes {
		sets, err := traceSets(tc, mix)
		if err != nil {
			return nil, nil, err
		}
		for _, set := range sets {
			for _, mps := range tc.Modes {
				load := 0.0
				for _, sp := range set.specs {
					load += Load(sp, set.gpus) / float64(len(set.specs))
				}
				rows = append(rows, Row{Trace: set.name, Mix: mix.Name, MPS: mps, Load: load, By: map[Policy]Result{}})
				for _, p := range Policies {
					tasks = append(tasks, task{row: len(rows) - 1, pol: p, specs: set.specs,
						cfg: Config{GPUs: set.gpus, Shares: tc.Shares, MPS: mps}})
				}
			}
		}
	}
	return rows, tasks, nil
}

// runTasks replays the tasks on tc.Workers goroutines; result and error k
// belong to task k.
func runTasks(tc TableConfig, rows []Row, tasks []task) ([]Result, []error) {
	results := make([]Result, len(tasks))
	errs := make([]error, len(tasks))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := 0; w < max(tc.Workers, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				t := tasks[k]
				var rs []Result
				for _, sp := range t.specs {
					r, err := Run(t.cfg, t.pol, sp)
					if err != nil {
						errs[k] = fmt.Errorf("%s %s: %w", rows[t.row].Trace, t.pol, err)
						break
					}
					r.Mix = rows[t.row].Mix
					rs = append(rs, r)
				}
				results[k] = Merge(rs)
				if tc.Progress != nil {
					mu.Lock()
					fmt.Fprintf(tc.Progress, "%-7s %-9s %-11s %-13s jct %.3f h  util while waiting %.3f  policy time %s\n",
						rows[t.row].Trace, rows[t.row].Mix, rows[t.row].Mode(), t.pol, results[k].AvgJCT/3600, results[k].UtilWait, results[k].DecideTime.Round(time.Millisecond))
					mu.Unlock()
				}
			}
		}()
	}
	for k := range tasks {
		next <- k
	}
	close(next)
	wg.Wait()
	return results, errs
}
