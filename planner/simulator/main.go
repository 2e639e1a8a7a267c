// Package simulator replays a workload through the planner's policies and
// is the CLI of `caravan planner simulate`: a discrete-event simulation of a
// GPU cluster in which job speed and progress come from measured traces
// (the Pollux OSDI'21 artifact's data), so policies can be compared with
// the published results. The engines live in sub-packages, one each:
// pollux (Simulate), steps (SimulateSteps) and philly (ReplayPhilly,
// ReplayPhillyQueues), sharing engine (Config, Result, PlanWithQueues);
// this package holds the CLI, the tables, the sweep, the output files and
// the decision-speed measurements.
package simulator

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/caravan-nomad/caravan/internal/cli"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/caravan-nomad/caravan/planner/simulator/philly"
	"github.com/caravan-nomad/caravan/planner/simulator/pollux"
	"github.com/caravan-nomad/caravan/planner/workload"
)

const usage = `Usage: caravan planner simulate [options]

Replays a workload through a planner policy on a simulated GPU cluster.

  caravan planner simulate --policy goodput --workload workloads/workload-1.csv
  caravan planner simulate --table                 # all policies x shared workloads vs published
  caravan planner simulate --scale                 # decision speed at 4,000/8,000 jobs x 16,000 nodes
  caravan planner simulate --queue-scale           # a planning round with queues: 25k-100k jobs, 1,000 queues, 32,000 nodes
  caravan planner simulate --philly [--nodes 128]  # full philly-jobs.csv replay
  caravan planner simulate --philly-queues [--nodes 128] [--out build/queues]   # philly's 15 virtual clusters as team queues, 4 ways of sharing
  caravan planner simulate --generate 160 --seed 7 > w.csv   # a new workload sampled from Philly
  caravan planner simulate --sweep --loads 0.5,1,1.5,2 --seeds 11-15   # generated workloads, every load, several seeds
  caravan planner simulate --list-policies         # name, information class, summary
  caravan planner simulate --workload w.csv --policy fifo,optimus,goodput --out build/sim   # CSV, JSON and SVG figures
  caravan planner simulate --sweep --out build/sweep                                        # sweep CSV, JSON, JCT by load
  caravan planner simulate --packing --workers 2 --out build/packing   # GPU packing: whole GPUs, static, introspective (MODELLED)

Options:
`

// Main runs ` + "`caravan planner simulate ...`" + `.
func Main(args []string) int {
	return run(args, os.Stdout, os.Stderr)
}

func run(args []string, stdout, stderr io.Writer) int {
	fs, o := newFlagSet(stderr)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return cli.ExitUsage
	}
	if code, ok := o.check(fs, stderr); !ok {
		return code
	}
	cfg := engine.Config{Nodes: *o.nodes, GPUsPerNode: *o.gpus, Interval: *o.interval, Interference: *o.interference}
	if *o.list {
		for _, in := range policy.Infos() {
			fmt.Fprintf(stdout, "%-15s %-9s %s\n", in.Name, in.Class, in.Summary)
		}
		return 0
	}
	dir, err := pollux.FindData(*o.data)
	if err != nil && (*o.table || *o.all || *o.sweep || *o.replayPhilly || *o.phillyQueues || *o.pack || *o.generate > 0 || (*o.wl == "" && !*o.scale && !*o.queueScale)) {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	if code, done := runMode(fs, o, cfg, dir, stdout, stderr); done {
		return code
	}
	if dir == "" {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return runWorkload(cfg, o, dir, stdout, stderr)
}

// options are run's flags.
type options struct {
	pol          *string
	out          *string
	wl           *string
	data         *string
	table        *bool
	all          *bool
	policies     *string
	list         *bool
	sweep        *bool
	loads        *string
	seeds        *string
	workers      *int
	replayPhilly *bool
	phillyQueues *bool
	nodes        *int
	gpus         *int
	interval     *float64
	interference *float64
	perJob       *bool
	generate     *int
	seed         *uint64
	startHour    *int
	hours        *int
	queueScale   *bool
	pack         *bool
	packMixes    *string
	packModes    *string
	packTraces   *string
	scale        *bool
}

// newFlagSet declares run's flags.
func newFlagSet(stderr io.Writer) (*flag.FlagSet, *options) {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	o := &options{}
	o.pol = fs.String("policy", policy.Best, "policy, or a comma-separated list replayed in turn: "+strings.Join(policy.Names(), ", "))
	o.out = fs.String("out", "", "with --workload or --sweep: write CSV, JSON and SVG figures into this directory (see planner/README.md)")
	o.wl = fs.String("workload", "", "workload CSV (name,time,application,num_replicas,batch_size); a relative path not found in the working directory is looked up in the data directory (workloads/workload-1.csv)")
	o.data = fs.String("data", "", "Pollux data directory (default: $"+pollux.DataEnv+", else shared/data/pollux beside the working directory, the binary or one of their parents)")
	o.table = fs.Bool("table", false, "replay every policy on every shared workload and print the table vs published")
	o.all = fs.Bool("all", false, "alias for --table")
	o.policies = fs.String("policies", "fifo,drf,tiresias,optimus,goodput-oracle,pollux,goodput", "policies for --table and --sweep")
	o.list = fs.Bool("list-policies", false, "print every policy as: name class summary")
	o.sweep = fs.Bool("sweep", false, "replay generated workloads at every --loads and --seeds under every --policies")
	o.loads = fs.String("loads", "0.5,1,1.5,2", "job loads for --sweep (jobs = 160 x load in the same window)")
	o.seeds = fs.String("seeds", "11-15", "seeds for --sweep: a range (11-15) or a list")
	o.workers = fs.Int("workers", 1, "replays run in parallel by --sweep and --packing")
	o.replayPhilly = fs.Bool("philly", false, "replay the full philly-jobs.csv (wall time and peak memory are printed)")
	o.phillyQueues = fs.Bool("philly-queues", false, "replay philly-jobs.csv with each virtual cluster as a team queue: strict quotas, one shared pool, borrowing, borrowing with reclaim")
	o.nodes = fs.Int("nodes", 0, "cluster nodes, at least 1 (default 16; --philly default 128)")
	o.gpus = fs.Int("gpus", 4, "GPUs per node")
	o.interval = fs.Float64("interval", 60, "scheduling interval in seconds")
	o.interference = fs.Float64("interference", 0, "slowdown (0..1) of a multi-node job sharing a node with another one")
	o.perJob = fs.Bool("jobs", true, "print every job's JCT (-jobs=false for the summary only)")
	o.generate = fs.Int("generate", 0, "write a workload of this many jobs sampled from philly-jobs.csv to stdout (with --seed, --start, --hours)")
	o.seed = fs.Uint64("seed", 0, "random seed for --generate, and of --packing's synthetic profiles")
	o.startHour = fs.Int("start", 2, "first hour of the day sampled by --generate")
	o.hours = fs.Int("hours", 8, "hours of the day sampled by --generate")
	o.queueScale = fs.Bool("queue-scale", false, "time one planning round with queues: 25k-100k jobs in 1,000 queues on 32,000 nodes (gangs, reclaim)")
	o.pack = fs.Bool("packing", false, "GPU packing: replay the Philly trace (--nodes, default 128) and the Pollux workloads (16 nodes) under whole GPUs, static packing at declared shares and right-sizing plus introspective packing; MODELLED interference, SYNTHETIC profiles (with --seed, --workers, --out)")
	o.packMixes = fs.String("packing-mixes", "base,light,heavy,gpu-bound", "with --packing: the profile mixes")
	o.packModes = fs.String("packing-modes", "time-sliced,mps", "with --packing: the GPUs' sharing modes")
	o.packTraces = fs.String("packing-traces", "philly,pollux", "with --packing: the traces")
	o.scale = fs.Bool("scale", false, "time one round for 4,000 and 8,000 jobs on 16,000 nodes (with --table: after the table)")
	return fs, o
}

// check rejects bad flag values and combinations; false means exit with
// the code returned.
func (o *options) check(fs *flag.FlagSet, stderr io.Writer) (int, bool) {
	if err := checkFlags(fs, *o.pol, *o.policies, *o.nodes, *o.gpus, *o.workers, *o.generate, *o.startHour, *o.hours, *o.interval, *o.interference); err != nil {
		return cli.Report(stderr, "caravan planner simulate", err), false
	}
	if *o.data != "" {
		if _, err := pollux.FindData(*o.data); err != nil {
			return cli.Report(stderr, "caravan planner simulate", fmt.Errorf("-data: %w", err)), false
		}
	}
	if *o.out != "" && (*o.wl == "" && !*o.sweep && !*o.phillyQueues && !*o.pack || *o.table || *o.all || *o.replayPhilly || *o.generate > 0) {
		fmt.Fprintln(stderr, "error: --out works with --workload or --sweep (or --philly-queues, --packing)")
		return 2, false
	}
	return 0, true
}

// runMode runs the mode the flags select other than a workload replay;
// false means none was selected.
func runMode(fs *flag.FlagSet, o *options, cfg engine.Config, dir string, stdout, stderr io.Writer) (int, bool) {
	switch {
	case *o.generate > 0:
		return runGenerate(o, dir, stdout, stderr), true
	case *o.pack:
		if cfg.Nodes == 0 {
			cfg.Nodes = 128
		}
		return runPacking(packingFlags{mixes: *o.packMixes, modes: *o.packModes, traces: *o.packTraces, seed: *o.seed,
			nodes: cfg.Nodes, gpus: cfg.GPUsPerNode, workers: *o.workers, out: *o.out}, dir, stdout, stderr), true
	case *o.sweep:
		return runSweep(cfg, dir, *o.loads, *o.seeds, *o.policies, *o.startHour, *o.hours, *o.workers, *o.out, stdout, stderr), true
	case *o.table || *o.all:
		return runTableMode(cfg, o, dir, stdout, stderr), true
	case *o.queueScale:
		if err := PrintQueueScale(stdout, []string{"fifo", policy.Best}); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1, true
		}
		return 0, true
	case *o.scale:
		if err := PrintScale(stdout, []string{"optimus", policy.Best}); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1, true
		}
		return 0, true
	case *o.phillyQueues:
		return runPhillyQueues(cfg, filepath.Join(dir, "philly-jobs.csv"), *o.out, stdout, stderr), true
	case *o.replayPhilly:
		return runReplayPhilly(cfg, o, dir, stdout, stderr), true
	case *o.wl == "":
		fmt.Fprintln(stderr, "error: --workload, --table or --philly is required")
		fs.Usage()
		return 2, true
	}
	return 0, false
}

// runGenerate writes a workload sampled from the Philly trace (--generate).
func runGenerate(o *options, dir string, stdout, stderr io.Writer) int {
	apps, err := pollux.LoadApplications(dir)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	trace, err := workload.ReadPhilly(filepath.Join(dir, "philly-jobs.csv"))
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	jobs, err := pollux.Generate(trace, apps, *o.generate, *o.startHour, *o.hours, *o.seed)
	if err == nil {
		err = pollux.WriteJobs(stdout, jobs)
	}
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

// runTableMode prints every policy on every shared workload (--table), and
// the decision speed after it with --scale.
func runTableMode(cfg engine.Config, o *options, dir string, stdout, stderr io.Writer) int {
	rows, names, err := RunTable(cfg, dir, strings.Split(*o.policies, ","), stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	PrintTable(stdout, rows, names)
	if *o.scale {
		fmt.Fprintln(stdout)
		if err := PrintScale(stdout, []string{"optimus", policy.Best}); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
	}
	return 0
}

// runReplayPhilly replays the full Philly trace under one policy (--philly).
func runReplayPhilly(cfg engine.Config, o *options, dir string, stdout, stderr io.Writer) int {
	if strings.Contains(*o.pol, ",") {
		fmt.Fprintf(stderr, "caravan planner simulate: -policy: --philly replays one policy, got %q\n", *o.pol)
		return 2
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 128
	}
	rep, err := philly.ReplayPhilly(cfg, *o.pol, filepath.Join(dir, "philly-jobs.csv"))
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	fmt.Fprintln(stdout, rep)
	return 0
}

// runWorkload replays --workload under each --policy and writes --out.
func runWorkload(cfg engine.Config, o *options, dir string, stdout, stderr io.Writer) int {
	apps, err := pollux.LoadApplications(dir)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	wlPath, err := resolveWorkload(*o.wl, dir)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	jobs, err := workload.ReadJobs(wlPath, pollux.Known(apps))
	if err != nil {
		fmt.Fprintf(stderr, "error: --workload %s: %v\n", *o.wl, err)
		return 1
	}
	cfg.Record = *o.out != ""
	var results []engine.Result
	for _, p := range strings.Split(*o.pol, ",") {
		res, err := pollux.Simulate(cfg, strings.TrimSpace(p), jobs, apps)
		if err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		res.Workload = *o.wl
		printRun(stdout, res, *o.perJob)
		results = append(results, res)
	}
	if *o.out != "" {
		if err := WriteRun(*o.out, results); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s, %s, %s, %s, %s, %s and %s<policy>.svg to %s\n",
			FileJobsCSV, FileRunsJSON, FileRoundsCSV, FileUtilCSV, FileJCTCDF, FileUtilSVG, allocSVGPrefix, *o.out)
	}
	return 0
}

// printRun prints one replay's jobs (with perJob), per-application and
// overall summary.
func printRun(stdout io.Writer, res engine.Result, perJob bool) {
	wl := &res.Workload
	if perJob {
		fmt.Fprintf(stdout, "%-20s %-12s %10s %10s %10s %8s\n", "job", "application", "submitted", "completed", "jct_s", "restarts")
		for _, j := range res.Jobs {
			fmt.Fprintf(stdout, "%-20s %-12s %10.0f %10.0f %10.0f %8d\n", j.Name, j.Application, j.Submitted, j.Completed, j.JCT, j.Restarts)
		}
	}
	byApp := map[string][2]float64{}
	for _, j := range res.Jobs {
		v := byApp[j.Application]
		byApp[j.Application] = [2]float64{v[0] + j.JCT, v[1] + 1}
	}
	for _, a := range sortedKeys(byApp) {
		fmt.Fprintf(stdout, "  %-12s %3.0f jobs  average JCT %7.0f s\n", a, byApp[a][1], byApp[a][0]/byApp[a][1])
	}
	fmt.Fprintf(stdout, "policy %s workload %s: %d jobs, average JCT %.0f s (%.3f h), makespan %.0f s, GPU utilisation %.2f, restarts %d, %d rounds, policy time %s\n",
		res.Policy, *wl, len(res.Jobs), res.AvgJCT, res.AvgJCT/3600, res.Makespan, res.GPUUtil, res.Restarts, res.Rounds, res.DecideTime)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func runSweep(cfg engine.Config, dir, loads, seeds, policies string, start, hours, workers int, out string, stdout, stderr io.Writer) int {
	sw := Sweep{Policies: strings.Split(policies, ","), Start: start, Hours: hours, Workers: workers}
	var err error
	if sw.Loads, err = parseLoads(loads); err == nil {
		sw.Seeds, err = parseSeeds(seeds)
	}
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	cells, err := RunSweep(cfg, dir, sw, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	PrintSweep(stdout, cells, sw, "pollux")
	if out != "" {
		if err := WriteSweep(out, cells, sw); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s, %s and %s to %s\n", FileSweepCSV, FileSweepJSON, FileJCTByLoad, out)
	}
	return 0
}
