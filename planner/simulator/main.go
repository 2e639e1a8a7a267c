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
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	pol := fs.String("policy", policy.Best, "policy, or a comma-separated list replayed in turn: "+strings.Join(policy.Names(), ", "))
	out := fs.String("out", "", "with --workload or --sweep: write CSV, JSON and SVG figures into this directory (see planner/README.md)")
	wl := fs.String("workload", "", "workload CSV (name,time,application,num_replicas,batch_size); a relative path not found in the working directory is looked up in the data directory (workloads/workload-1.csv)")
	data := fs.String("data", "", "Pollux data directory (default: $"+pollux.DataEnv+", else shared/data/pollux beside the working directory, the binary or one of their parents)")
	table := fs.Bool("table", false, "replay every policy on every shared workload and print the table vs published")
	all := fs.Bool("all", false, "alias for --table")
	policies := fs.String("policies", "fifo,drf,tiresias,optimus,goodput-oracle,pollux,goodput", "policies for --table and --sweep")
	list := fs.Bool("list-policies", false, "print every policy as: name class summary")
	sweep := fs.Bool("sweep", false, "replay generated workloads at every --loads and --seeds under every --policies")
	loads := fs.String("loads", "0.5,1,1.5,2", "job loads for --sweep (jobs = 160 x load in the same window)")
	seeds := fs.String("seeds", "11-15", "seeds for --sweep: a range (11-15) or a list")
	workers := fs.Int("workers", 1, "replays run in parallel by --sweep and --packing")
	replayPhilly := fs.Bool("philly", false, "replay the full philly-jobs.csv (wall time and peak memory are printed)")
	phillyQueues := fs.Bool("philly-queues", false, "replay philly-jobs.csv with each virtual cluster as a team queue: strict quotas, one shared pool, borrowing, borrowing with reclaim")
	nodes := fs.Int("nodes", 0, "cluster nodes, at least 1 (default 16; --philly default 128)")
	gpus := fs.Int("gpus", 4, "GPUs per node")
	interval := fs.Float64("interval", 60, "scheduling interval in seconds")
	interference := fs.Float64("interference", 0, "slowdown (0..1) of a multi-node job sharing a node with another one")
	perJob := fs.Bool("jobs", true, "print every job's JCT (-jobs=false for the summary only)")
	generate := fs.Int("generate", 0, "write a workload of this many jobs sampled from philly-jobs.csv to stdout (with --seed, --start, --hours)")
	seed := fs.Uint64("seed", 0, "random seed for --generate, and of --packing's synthetic profiles")
	startHour := fs.Int("start", 2, "first hour of the day sampled by --generate")
	hours := fs.Int("hours", 8, "hours of the day sampled by --generate")
	queueScale := fs.Bool("queue-scale", false, "time one planning round with queues: 25k-100k jobs in 1,000 queues on 32,000 nodes (gangs, reclaim)")
	pack := fs.Bool("packing", false, "GPU packing: replay the Philly trace (--nodes, default 128) and the Pollux workloads (16 nodes) under whole GPUs, static packing at declared shares and right-sizing plus introspective packing; MODELLED interference, SYNTHETIC profiles (with --seed, --workers, --out)")
	packMixes := fs.String("packing-mixes", "base,light,heavy,gpu-bound", "with --packing: the profile mixes")
	packModes := fs.String("packing-modes", "time-sliced,mps", "with --packing: the GPUs' sharing modes")
	packTraces := fs.String("packing-traces", "philly,pollux", "with --packing: the traces")
	scale := fs.Bool("scale", false, "time one round for 4,000 and 8,000 jobs on 16,000 nodes (with --table: after the table)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return cli.ExitUsage
	}
	if err := checkFlags(fs, *pol, *policies, *nodes, *gpus, *workers, *generate, *startHour, *hours, *interval, *interference); err != nil {
		return cli.Report(stderr, "caravan planner simulate", err)
	}
	if *data != "" {
		if _, err := pollux.FindData(*data); err != nil {
			return cli.Report(stderr, "caravan planner simulate", fmt.Errorf("-data: %w", err))
		}
	}
	if *out != "" && (*wl == "" && !*sweep && !*phillyQueues && !*pack || *table || *all || *replayPhilly || *generate > 0) {
		fmt.Fprintln(stderr, "error: --out works with --workload or --sweep (or --philly-queues, --packing)")
		return 2
	}
	cfg := engine.Config{Nodes: *nodes, GPUsPerNode: *gpus, Interval: *interval, Interference: *interference}
	if *list {
		for _, in := range policy.Infos() {
			fmt.Fprintf(stdout, "%-15s %-9s %s\n", in.Name, in.Class, in.Summary)
		}
		return 0
	}
	dir, err := pollux.FindData(*data)
	if err != nil && (*table || *all || *sweep || *replayPhilly || *phillyQueues || *pack || *generate > 0 || (*wl == "" && !*scale && !*queueScale)) {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	switch {
	case *generate > 0:
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
		jobs, err := pollux.Generate(trace, apps, *generate, *startHour, *hours, *seed)
		if err == nil {
			err = pollux.WriteJobs(stdout, jobs)
		}
		if err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		return 0
	case *pack:
		if cfg.Nodes == 0 {
			cfg.Nodes = 128
		}
		return runPacking(packingFlags{mixes: *packMixes, modes: *packModes, traces: *packTraces, seed: *seed,
			nodes: cfg.Nodes, gpus: cfg.GPUsPerNode, workers: *workers, out: *out}, dir, stdout, stderr)
	case *sweep:
		return runSweep(cfg, dir, *loads, *seeds, *policies, *startHour, *hours, *workers, *out, stdout, stderr)
	case *table || *all:
		rows, names, err := RunTable(cfg, dir, strings.Split(*policies, ","), stderr)
		if err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		PrintTable(stdout, rows, names)
		if *scale {
			fmt.Fprintln(stdout)
			if err := PrintScale(stdout, []string{"optimus", policy.Best}); err != nil {
				fmt.Fprintln(stderr, "error:", err)
				return 1
			}
		}
		return 0
	case *queueScale:
		if err := PrintQueueScale(stdout, []string{"fifo", policy.Best}); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		return 0
	case *scale:
		if err := PrintScale(stdout, []string{"optimus", policy.Best}); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		return 0
	case *phillyQueues:
		return runPhillyQueues(cfg, filepath.Join(dir, "philly-jobs.csv"), *out, stdout, stderr)
	case *replayPhilly:
		if strings.Contains(*pol, ",") {
			fmt.Fprintf(stderr, "caravan planner simulate: -policy: --philly replays one policy, got %q\n", *pol)
			return 2
		}
		if cfg.Nodes == 0 {
			cfg.Nodes = 128
		}
		rep, err := philly.ReplayPhilly(cfg, *pol, filepath.Join(dir, "philly-jobs.csv"))
		if err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		fmt.Fprintln(stdout, rep)
		return 0
	case *wl == "":
		fmt.Fprintln(stderr, "error: --workload, --table or --philly is required")
		fs.Usage()
		return 2
	}
	if dir == "" {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	apps, err := pollux.LoadApplications(dir)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	wlPath, err := resolveWorkload(*wl, dir)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	jobs, err := workload.ReadJobs(wlPath, pollux.Known(apps))
	if err != nil {
		fmt.Fprintf(stderr, "error: --workload %s: %v\n", *wl, err)
		return 1
	}
	cfg.Record = *out != ""
	var results []engine.Result
	for _, p := range strings.Split(*pol, ",") {
		res, err := pollux.Simulate(cfg, strings.TrimSpace(p), jobs, apps)
		if err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		res.Workload = *wl
		printRun(stdout, res, *perJob)
		results = append(results, res)
	}
	if *out != "" {
		if err := WriteRun(*out, results); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s, %s, %s, %s, %s, %s and %s<policy>.svg to %s\n",
			FileJobsCSV, FileRunsJSON, FileRoundsCSV, FileUtilCSV, FileJCTCDF, FileUtilSVG, allocSVGPrefix, *out)
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
