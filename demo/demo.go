// Package demo is `caravan demo`: it drives a running caravan cluster
// through the product's main story (GPU sharing, a checkpointed training job
// suspended, resumed and migrated, the same trainer as a container under
// Nomad's docker driver suspended and resumed, and a planner decision) the way a user
// would, with `nomad job run` and Nomad's API, and prints what happened.
// `make demo` starts the local cluster and runs it; the e2e UI test runs the
// same scenario, so the demo cannot rot.
package demo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/caravan-nomad/caravan/internal/cli"
	"github.com/caravan-nomad/caravan/internal/cluster"
)

// Config says which cluster the demo drives.
type Config struct {
	// Root is the repository root (for jobspecs/).
	Root string
	// NomadBin is the Nomad CLI used to submit jobspecs.
	NomadBin string
	// CaravanBin is the caravan binary as the clients see it.
	CaravanBin string
	// NomadAddr and ConsulAddr are the agents' HTTP addresses.
	NomadAddr, ConsulAddr string
	// StateDir is a directory every client reaches (the simulated planner
	// jobs keep their global step there).
	StateDir string
	// CheckpointStore is the driver's checkpoint store; the demo removes
	// its own jobs' checkpoints there before it starts.
	CheckpointStore string
	// Steps is the length of the checkpointed training run.
	Steps int
	// ElasticSteps is the length of each elastic training job of the
	// planner part.
	ElasticSteps int
	// SkipPlanner leaves out the planner part.
	SkipPlanner bool
	// Teardown says the cluster is stopped right after the demo
	// (DEMO_TEARDOWN=1), so the summary prints no addresses.
	Teardown bool
	// WhilePlanning, when set, is called once the planner has made room
	// for the third elastic job, while the jobs run, with the planner's
	// address (host:port); an error ends the demo. The UI test looks at the
	// planner's web page there.
	WhilePlanning func(ctx context.Context, plannerAddr string) error
}

// Result is what the demo saw, for its summary and for tests.
type Result struct {
	Sharing   SharingResult
	Training  TrainingResult
	Container ContainerResult
	Planner   PlannerResult
}

// Demo runs the scenario against one cluster.
type Demo struct {
	cfg   Config
	out   io.Writer
	c     *cluster.Cluster
	start time.Time
}

// New connects to the cluster.
func New(cfg Config, out io.Writer) (*Demo, error) {
	if cfg.Steps <= 0 {
		cfg.Steps = 6000
	}
	if cfg.ElasticSteps <= 0 {
		cfg.ElasticSteps = 2000
	}
	d := &Demo{cfg: cfg, out: out, start: time.Now()}
	c, err := cluster.Dial(cluster.Config{Root: cfg.Root, NomadBin: cfg.NomadBin, NomadAddr: cfg.NomadAddr,
		ConsulAddr: cfg.ConsulAddr, CaravanBin: cfg.CaravanBin, Say: d.say})
	if err != nil {
		return nil, err
	}
	d.c = c
	return d, nil
}

// Run runs every part of the scenario in turn and prints the summary.
func (d *Demo) Run(ctx context.Context) (*Result, error) {
	res := &Result{}
	if err := d.cleanup(ctx); err != nil {
		return res, fmt.Errorf("cleaning up an earlier run: %w", err)
	}
	var err error
	d.step("1/5 GPU sharing: two jobs ask for 2 of a GPU's 4 shares")
	if res.Sharing, err = d.sharing(ctx); err != nil {
		return res, fmt.Errorf("gpu sharing: %w", err)
	}
	d.step("2/5 A checkpointed training job: suspend (scale to 0) and resume")
	if res.Training, err = d.training(ctx); err != nil {
		return res, fmt.Errorf("checkpointed training: %w", err)
	}
	// The migration moves the resumed run while it trains: it comes before
	// the container part, which a slow machine can stretch past the
	// training's end.
	d.step("3/5 Migration: the node is made ineligible and the allocation stopped; training continues on the other client")
	if err = d.migrate(ctx, &res.Training); err != nil {
		return res, fmt.Errorf("migration: %w", err)
	}
	d.step("4/5 The same trainer as a container (Nomad's docker driver, image built here): suspend and resume")
	if res.Container, err = d.container(ctx); err != nil {
		return res, fmt.Errorf("container job: %w", err)
	}
	if !d.cfg.SkipPlanner {
		d.step("5/5 The planner: elastic training jobs grow on idle GPUs and shrink to make room")
		if res.Planner, err = d.planner(ctx); err != nil {
			return res, fmt.Errorf("planner: %w", err)
		}
	}
	d.step("Waiting for the training jobs to finish")
	if err = d.finishTraining(ctx, &res.Training); err != nil {
		return res, fmt.Errorf("checkpointed training: %w", err)
	}
	if err = d.finishContainer(ctx, &res.Container); err != nil {
		return res, fmt.Errorf("container job: %w", err)
	}
	if res.Planner.Instance != "" {
		// The planner's address as Consul has it now, not as it was
		// when the planner part began.
		if res.Planner.Instance, err = d.c.PlannerAddr(ctx); err != nil {
			d.say("the planner's address: %v", err)
		}
	}
	d.summary(res)
	return res, nil
}

func (d *Demo) step(title string) {
	fmt.Fprintf(d.out, "\n\033[1m==> %s\033[0m\n", title)
}

func (d *Demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "    "+format+"\n", args...)
}

// Main runs `caravan demo`.
func Main(args []string) int {
	fs := flag.NewFlagSet("caravan demo", flag.ContinueOnError)
	cfg := Config{}
	wd, _ := os.Getwd()
	fs.StringVar(&cfg.Root, "root", wd, "repository root (holds jobspecs/)")
	fs.StringVar(&cfg.NomadBin, "nomad-bin", filepath.Join(wd, "build", "bin", "nomad"), "Nomad CLI")
	fs.StringVar(&cfg.CaravanBin, "caravan-bin", "", "caravan binary as the clients run it (required)")
	fs.StringVar(&cfg.NomadAddr, "nomad-addr", envOr("NOMAD_ADDR", "http://127.0.0.1:4646"), "Nomad HTTP address")
	fs.StringVar(&cfg.ConsulAddr, "consul-addr", envOr("CONSUL_HTTP_ADDR", "127.0.0.1:8500"), "Consul HTTP address")
	fs.StringVar(&cfg.StateDir, "state-dir", "", "directory every client reaches (required)")
	fs.StringVar(&cfg.CheckpointStore, "checkpoint-store", "", "the driver's checkpoint store (required)")
	fs.IntVar(&cfg.Steps, "steps", 6000, "steps of the checkpointed training run")
	fs.IntVar(&cfg.ElasticSteps, "elastic-steps", 2000, "steps of each elastic training job in the planner part")
	fs.BoolVar(&cfg.SkipPlanner, "skip-planner", false, "leave out the planner part")
	fs.BoolVar(&cfg.Teardown, "teardown", false, "the cluster is stopped after the demo: print no UI addresses")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: caravan demo -caravan-bin BIN -state-dir DIR -checkpoint-store DIR [flags]\n\n"+
			"Drives a running cluster through the demo scenario (make demo runs it).\n\nFlags:\n")
		cli.PrintFlags(fs.Output(), fs)
	}
	if err := fs.Parse(args); err != nil {
		return cli.ParseExit(err)
	}
	if err := checkFlags(fs, cfg); err != nil {
		return cli.Report(os.Stderr, "caravan demo", err)
	}
	if cfg.CaravanBin == "" || cfg.StateDir == "" || cfg.CheckpointStore == "" {
		fmt.Fprintln(os.Stderr, "caravan demo: -caravan-bin, -state-dir and -checkpoint-store are required")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d, err := New(cfg, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "caravan demo: %v\n", err)
		return 1
	}
	if _, err := d.Run(ctx); err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "\ncaravan demo: interrupted; the cluster is left as it is")
			return 130
		}
		fmt.Fprintf(os.Stderr, "\ncaravan demo: %v\n", err)
		return 1
	}
	return 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// checkFlags rejects stray arguments and run lengths the demo cannot use.
func checkFlags(fs *flag.FlagSet, cfg Config) error {
	c := cli.For(fs)
	c.NoArgs()
	c.AtLeast("steps", cfg.Steps, 1)
	c.AtLeast("elastic-steps", cfg.ElasticSteps, 1)
	return c.Err()
}
