package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/caravan-nomad/caravan/planner/simulator/pollux"
	"github.com/caravan-nomad/caravan/planner/simulator/steps"
	"github.com/caravan-nomad/caravan/planner/workload"
)

const usage = `Usage: caravan testbed [options]

Runs a workload of distributed-trainer jobs (jobspecs/train-elastic.nomad.hcl,
MODELLED compute, SIMULATED GPUs) on a running caravan cluster once per
policy: the planner with a policy, or "static" (no planner, each job at its
requested workers, queued by Nomad). It measures JCT, makespan, GPU
utilisation, restarts and checkpoints from Nomad's allocations and task
events, replays the same workload through the planner simulator, prints a
table and writes CSV/JSON under --out (testbed/README.md).

  make testbed                                   # the default workload
  caravan testbed --caravan-bin $PWD/build/caravan --out build/testbed
  caravan testbed --dry-run                      # the workload and the simulator's figures only

Options:
`

// trainer defaults (trainer/config.go): the simulator's step model uses them.
const (
	trainerBatch       = 64
	trainerMicroShards = 8
)

// Main runs `caravan testbed`.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, args, os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(os.Stderr, "caravan testbed: interrupted; run it again to purge its jobs")
		return 130
	}
	fmt.Fprintf(os.Stderr, "caravan testbed: %v\n", err)
	return 1
}

var errUsage = errors.New("usage")

// options are the command's flags.
type options struct {
	cfg      Config
	sample   SampleOptions
	data     string
	workload string
	policies []string
	out      string
	dryRun   bool
	from     string
	overhead time.Duration
	delay    time.Duration
}

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{sample: DefaultSampleOptions(), cfg: DefaultConfig()}
	fs := flag.NewFlagSet("caravan testbed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	wd, _ := os.Getwd()
	d := &o.cfg.Target
	fs.StringVar(&d.Root, "root", wd, "repository root (holds jobspecs/)")
	fs.StringVar(&d.NomadBin, "nomad-bin", filepath.Join(wd, "build", "bin", "nomad"), "Nomad CLI")
	fs.StringVar(&d.CaravanBin, "caravan-bin", "", "caravan binary as the clients run it (required unless --dry-run)")
	fs.StringVar(&d.NomadAddr, "nomad-addr", envOr("NOMAD_ADDR", "http://127.0.0.1:4646"), "Nomad HTTP address")
	fs.StringVar(&d.ConsulAddr, "consul-addr", envOr("CONSUL_HTTP_ADDR", "127.0.0.1:8500"), "Consul HTTP address")
	fs.StringVar(&o.data, "data", "", "Pollux data directory (default: $"+pollux.DataEnv+", ../shared/data/pollux)")
	fs.StringVar(&o.workload, "workload", "workloads/workload-1.csv", "trace workload to sample, relative to --data (name,time,application,num_replicas,batch_size)")
	pols := fs.String("policies", "static,optimus,goodput", "runs, in order: planner policies and \"static\" (no planner)")
	fs.StringVar(&o.out, "out", filepath.Join("build", "testbed"), "directory for results.json and the CSV files")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the workload and the simulator's figures; touch no cluster")
	fs.StringVar(&o.from, "from", "", "recompute the metrics and the simulation from an earlier run's DIR/results.json (touches no cluster)")
	s := &o.sample
	fs.IntVar(&s.Jobs, "jobs", s.Jobs, "jobs sampled from the workload")
	fs.Uint64Var(&s.Seed, "seed", s.Seed, "sampling seed")
	fs.DurationVar(&s.Window, "window", s.Window, "the arrivals are scaled into this span")
	fs.DurationVar(&s.MedianCompute, "compute", s.MedianCompute, "MODELLED compute per sample of the median job (the others scale with their traces)")
	fs.DurationVar(&s.TotalWork, "work", s.TotalWork, "the jobs' one-worker work in all, before clamping")
	fs.DurationVar(&s.MinWork, "min-work", s.MinWork, "least one-worker work of a job")
	fs.DurationVar(&s.MaxWork, "max-work", s.MaxWork, "most one-worker work of a job")
	c := &o.cfg
	fs.IntVar(&c.Cluster.Nodes, "clients", c.Cluster.Nodes, "the cluster's Nomad clients with GPUs (scripts/cluster.sh: 2; CARAVAN_CLIENTS, make testbed CLIENTS=N)")
	fs.IntVar(&c.Cluster.Nodes, "nodes", c.Cluster.Nodes, "deprecated name of --clients")
	fs.IntVar(&c.Cluster.GPUsPerNode, "gpus-per-node", c.Cluster.GPUsPerNode, "simulated GPUs per node (scripts/cluster/plugin-device.hcl: 2)")
	fs.IntVar(&c.Cluster.SharesPerGPU, "shares-per-gpu", c.Cluster.SharesPerGPU, "the device plugin's shares per GPU")
	fs.IntVar(&c.Cluster.WorkerShares, "worker-shares", c.Cluster.WorkerShares, "GPU shares per worker")
	fs.DurationVar(&c.Interval, "interval", c.Interval, "the planner's decision interval")
	fs.DurationVar(&c.Cooldown, "cooldown", c.Cooldown, "the planner's least time between two changes of a job")
	fs.DurationVar(&c.ResizeCost, "resize-cost", c.ResizeCost, "what each job declares a change of its workers costs it (caravan_resize_cost)")
	fs.DurationVar(&c.Quantum, "quantum", c.Quantum, "the planner's suspend quantum (time-slicing under overload)")
	fs.IntVar(&c.ReportSteps, "report-every", c.ReportSteps, "steps between two progress reports of a job (the trainer's -log-every)")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "the longest one policy run may take")
	fs.DurationVar(&c.Poll, "poll", c.Poll, "how often Nomad is read")
	fs.DurationVar(&c.Progress, "progress", c.Progress, "how often a progress line is printed")
	fs.StringVar(&c.CheckpointInterval, "checkpoint-interval", c.CheckpointInterval, "the coordinators' periodic checkpoint interval")
	fs.StringVar(&c.Prefix, "prefix", c.Prefix, "job ID prefix (jobs with it are purged between runs)")
	fs.DurationVar(&o.overhead, "sim-step-overhead", 5*time.Millisecond, "per-step overhead for --dry-run's simulation (a live run measures it)")
	fs.DurationVar(&o.delay, "sim-start-delay", 5*time.Second, "start delay for --dry-run's simulation (a live run measures it)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, errUsage
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	s.Prefix, s.Batch, s.GPUs = c.Prefix, trainerBatch, c.Cluster.GPUs()
	o.policies = nil
	for _, p := range strings.Split(*pols, ",") {
		if p = strings.TrimSpace(p); p != "" {
			o.policies = append(o.policies, p)
		}
	}
	return o, o.validate()
}

// DefaultConfig is the local cluster (scripts/cluster.sh: two clients of
// two simulated GPUs of four shares; a worker holds a whole GPU) and the
// planner's timings for the testbed.
func DefaultConfig() Config {
	return Config{
		Cluster:  Cluster{Nodes: 2, GPUsPerNode: 2, SharesPerGPU: 4, WorkerShares: 4},
		Interval: 5 * time.Second, Cooldown: 15 * time.Second, ResizeCost: 5 * time.Second, ReportSteps: 10,
		Quantum: 10 * time.Minute, Timeout: 45 * time.Minute,
		Poll: 3 * time.Second, Progress: 20 * time.Second, CheckpointInterval: "1m", Prefix: "tb-",
	}
}

func (o *options) validate() error {
	c := o.cfg.Cluster
	switch {
	case len(o.policies) == 0:
		return errors.New("--policies: name at least one policy or \"static\"")
	case c.Nodes < 1 || c.GPUsPerNode < 1 || c.SharesPerGPU < 1 || c.WorkerShares < 1:
		return errors.New("--clients, --gpus-per-node, --shares-per-gpu, --worker-shares: must be at least 1")
	case !o.dryRun && o.from == "" && o.cfg.Target.CaravanBin == "":
		return errors.New("--caravan-bin: required (the caravan binary the clients run)")
	case o.cfg.Interval <= 0 || o.cfg.Poll <= 0 || o.cfg.Timeout <= 0 || o.cfg.Progress <= 0:
		return errors.New("--interval, --poll, --progress, --timeout: must be positive")
	case o.cfg.Prefix == "":
		return errors.New("--prefix: must not be empty (it says which jobs are purged)")
	case o.cfg.ReportSteps < 1:
		return errors.New("--report-every: must be at least 1")
	case o.cfg.Cooldown < 0 || o.cfg.ResizeCost < 0:
		return errors.New("--cooldown, --resize-cost: must not be negative")
	case o.cfg.Quantum <= 0:
		return errors.New("--quantum: must be positive (the planner's suspend_quantum)")
	}
	for _, p := range o.policies {
		if err := checkPolicy(p); err != nil {
			return fmt.Errorf("--policies: %w", err)
		}
	}
	if err := o.sample.validate(); err != nil {
		return fmt.Errorf("--%w", err)
	}
	return nil
}

// loadWorkload samples the workload from the data directory.
func (o *options) loadWorkload() ([]Job, error) {
	dir, err := pollux.FindData(o.data)
	if err != nil {
		return nil, fmt.Errorf("--data: %w", err)
	}
	traces, err := workload.ReadTraces(filepath.Join(dir, "traces"))
	if err != nil {
		return nil, fmt.Errorf("--data: %w", err)
	}
	costs, err := CostsFromTraces(traces)
	if err != nil {
		return nil, fmt.Errorf("--data: %w", err)
	}
	known := map[string]bool{}
	for name := range costs {
		known[name] = true
	}
	trace, err := workload.ReadJobs(filepath.Join(dir, o.workload), known)
	if err != nil {
		return nil, fmt.Errorf("--workload: %w", err)
	}
	jobs, err := SampleWorkload(trace, costs, o.sample)
	if err != nil {
		return nil, fmt.Errorf("sampling the workload: %w", err)
	}
	return jobs, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) && !errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "caravan testbed: %v\n", err)
			return errUsage
		}
		return err
	}
	if o.from != "" {
		return rerun(stdout, o)
	}
	jobs, err := o.loadWorkload()
	if err != nil {
		return err
	}
	res := &Results{Options: o.sample, Cluster: o.cfg.Cluster, Workload: jobs, TimelineStep: 5 * time.Second,
		Interval: o.cfg.Interval, Cooldown: o.cfg.Cooldown, ResizeCost: o.cfg.ResizeCost,
		ReportSteps: o.cfg.ReportSteps, Quantum: o.cfg.Quantum}
	printWorkload(stdout, jobs, o)
	if o.dryRun {
		return dryRun(stdout, o, res)
	}
	if err := CheckClients(ctx, o.cfg); err != nil {
		return err
	}
	for i, pol := range o.policies {
		fmt.Fprintf(stdout, "\n==> run %d/%d: %s\n", i+1, len(o.policies), describe(pol))
		r, err := RunPolicy(ctx, o.cfg, pol, jobs, stdout)
		if r != nil && r.Records != nil {
			res.Runs = append(res.Runs, r)
		}
		if err != nil {
			return fmt.Errorf("%s run: %w", pol, err)
		}
		if err := finish(o, res, stdout); err != nil { // each run's results are written at once
			return err
		}
	}
	if err := Purge(ctx, o.cfg, stdout); err != nil {
		return fmt.Errorf("purging the last run: %w", err)
	}
	report(stdout, o, res)
	return nil
}

func report(stdout io.Writer, o *options, res *Results) {
	fmt.Fprintln(stdout)
	PrintTable(stdout, res)
	fmt.Fprintln(stdout, "\nsimulator calibrated per run from the other runs' jobs of one shape (out of sample; in sample only where none is left: a fit check):")
	for _, f := range res.Fidelity {
		c := f.Calibration
		fmt.Fprintf(stdout, "  %-8s step time = %s + %.3f x modelled compute (%d jobs), start delay %s: %s\n", f.Policy,
			c.StepOverhead.Round(100*time.Microsecond), c.ComputeFactor, c.Points, c.StartDelay.Round(time.Millisecond), f.CalibrationLabel())
	}
	c := res.Calibration
	fmt.Fprintf(stdout, "all runs together: step time = %s + %.3f x modelled compute (%d jobs), start delay %s\nresults in %s\n",
		c.StepOverhead.Round(100*time.Microsecond), c.ComputeFactor, c.Points, c.StartDelay.Round(time.Millisecond), o.out)
}

// rerun recomputes an earlier run's metrics from its Nomad records, then
// the calibration and the simulation, and writes them to --out.
func rerun(stdout io.Writer, o *options) error {
	b, err := os.ReadFile(filepath.Join(o.from, "results.json"))
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	var res Results
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("--from: %s/results.json: %w", o.from, err)
	}
	if len(res.Runs) == 0 {
		return fmt.Errorf("--from: %s/results.json holds no run", o.from)
	}
	o.cfg.Cluster, o.cfg.Interval, o.cfg.Cooldown, o.cfg.ResizeCost = res.Cluster, res.Interval, res.Cooldown, res.ResizeCost
	o.cfg.ReportSteps, o.cfg.Quantum = res.ReportSteps, res.Quantum
	if o.cfg.Quantum == 0 {
		o.cfg.Quantum = 10 * time.Minute // the planner jobspec's, before the testbed set it
	}
	if o.cfg.ReportSteps == 0 {
		o.cfg.ReportSteps = 50 // the jobspec's -log-every, before the testbed set it
	}
	for _, r := range res.Runs {
		r.Jobs = r.Jobs[:0]
		for _, rec := range r.Records {
			r.Jobs = append(r.Jobs, JobMetricsOf(rec, r.End))
		}
		r.Summary = Summarize(r.Policy, r.Jobs, res.Cluster)
	}
	if err := finish(o, &res, io.Discard); err != nil {
		return err
	}
	report(stdout, o, &res)
	return nil
}

// finish calibrates, simulates every run so far and writes the results.
func finish(o *options, res *Results, stdout io.Writer) error {
	res.Calibration = Calibrate(res.Runs, res.Workload)
	fid, err := Predict(res.Runs, res.Workload, o.cfg)
	if err != nil {
		return err
	}
	res.Fidelity = fid
	if err := Write(o.out, res); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	last := res.Runs[len(res.Runs)-1].Summary
	fmt.Fprintf(stdout, "    %s: %d/%d jobs finished, avg JCT %s, makespan %s, GPU util %.0f%%\n",
		last.Policy, last.Finished, last.Jobs, dur(last.AvgJCT), dur(last.Makespan), 100*last.Util)
	return nil
}

func describe(pol string) string {
	if pol == Static {
		return "static baseline (no planner; each job at its requested workers, queued by Nomad)"
	}
	return "the planner with policy " + pol
}

func printWorkload(w io.Writer, jobs []Job, o *options) {
	var work time.Duration
	for _, j := range jobs {
		work += j.Work(trainerBatch)
	}
	fmt.Fprintf(w, "workload: %d jobs from %s (seed %d), arrivals over %s, %s of one-worker work on %d simulated GPUs\n",
		len(jobs), o.workload, o.sample.Seed, o.sample.Window, work.Round(time.Second), o.cfg.Cluster.GPUs())
	fmt.Fprintln(w, "compute is MODELLED (each worker sleeps compute-per-sample per sample); the GPUs are SIMULATED")
	for _, j := range jobs {
		fmt.Fprintf(w, "  %-22s %-12s at %6s  %d worker(s)  %5d steps x %s/sample  (%s on one worker)\n", j.Name, j.Model,
			j.Arrival, j.Workers, j.Steps, j.ComputePerSample, j.Work(trainerBatch).Round(time.Second))
	}
}

// dryRun simulates every policy with the flags' calibration.
func dryRun(stdout io.Writer, o *options, res *Results) error {
	cal := Calibration{StepOverhead: o.overhead, ComputeFactor: 1, StartDelay: o.delay}
	sc, sjs := SimConfig(o.cfg, cal), stepJobs(res.Workload, cal)
	fmt.Fprintln(stdout, "\nsimulator only (--dry-run):")
	for _, pol := range o.policies {
		r, err := steps.SimulateSteps(sc, SimPolicy(pol), sjs)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  %-8s (sim %-11s) avg JCT %s, makespan %s, GPU util %.0f%%\n", pol, SimLabel(pol),
			secs(r.AvgJCT).Round(time.Second), secs(r.Makespan).Round(time.Second), 100*r.GPUUtil)
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
