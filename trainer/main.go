// Package trainer is a small deterministic training program (`caravan
// trainer`) that follows caravan's checkpoint protocol (driver/protocol): real
// mini-batch SGD with momentum on a one-hidden-layer MLP over a synthetic,
// seeded dataset. An uninterrupted run and a run suspended, resumed and
// migrated any number of times end with the same parameters, bit for bit;
// the final line prints their SHA-256.
package trainer

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/caravan-nomad/caravan/driver/protocol"
	"github.com/caravan-nomad/caravan/internal/cli"
	"github.com/caravan-nomad/caravan/progress"
)

// Main runs `caravan trainer [flags]`.
func Main(args []string) int {
	return run(args, os.Getenv, os.Stdout, os.Stderr)
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "ps":
			return runPS(args[1:], getenv, stdout, stderr)
		case "worker":
			return runWorker(args[1:], getenv, stdout, stderr)
		}
	}
	a, code, ok := parseTrainerArgs(args, getenv, stderr)
	if !ok {
		return code
	}
	c, env := a.c, a.env

	// Signals become requests served between two steps.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	requests, exitSig := checkpointRequests(ctx, a.ckptSig, a.dir)

	o := Options{
		Dir: a.dir, MinSequence: env.Sequence, Requests: requests, Out: stdout, Hold: a.hold, GPU: a.gpu,
		Identity: Progress{Job: getenv("NOMAD_JOB_ID"), Alloc: getenv("NOMAD_ALLOC_ID"), Task: getenv("NOMAD_TASK_NAME")},
	}
	rep, err := newReporter(a.reportURL, getenv(progress.EnvURLsFile), a.tokenFile, a.tokenDefault, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "caravan trainer: %v\n", err)
		return 2
	}
	if rep != nil {
		o.Reporter = rep
	}
	if env.Generation > 0 {
		fmt.Fprintf(stdout, "restored generation=%d from_node=%s\n", env.Generation, env.FromNode)
	}
	res, err := Run(ctx, c, o)
	if err != nil {
		fmt.Fprintf(stderr, "caravan trainer: %v\n", err)
		return 1
	}
	if res.Interrupted {
		cancel()
		if a.hold && res.Step == c.Steps {
			return 0 // a finished, held run stopped: success
		}
		if s := exitSig.Load(); s != 0 {
			return 128 + int(s)
		}
		return 1
	}
	return 0
}

// trainerArgs are the trainer's checked flags and the restored-task
// environment.
type trainerArgs struct {
	c                       Config
	env                     *protocol.Restored
	dir                     string
	ckptSig                 syscall.Signal
	gpu                     GPUProfile
	hold                    bool
	tokenFile, tokenDefault string
	reportURL               string
}

// parseTrainerArgs parses and checks the trainer's flags (creating the
// checkpoint directory); false means exit with the code returned.
func parseTrainerArgs(args []string, getenv func(string) string, stderr io.Writer) (*trainerArgs, int, bool) {
	c := DefaultConfig()
	env, err := protocol.FromEnv(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "caravan trainer: %v\n", err)
		return nil, 2, false
	}
	sigDefault := env.Signal
	if sigDefault == "" {
		sigDefault = "SIGUSR1"
	}
	urlDefault := progress.URLFromEnv(getenv)

	fs := flag.NewFlagSet("caravan trainer", flag.ContinueOnError)
	setUsage(fs, stderr, trainerUsage)
	configFlags(fs, &c)
	dir := fs.String("checkpoint-dir", env.Dir, "checkpoint directory (default $"+protocol.EnvDir+"; empty: no checkpoints)")
	sigName := fs.String("checkpoint-signal", sigDefault, "signal that asks for a checkpoint (default $"+protocol.EnvSignal+" or SIGUSR1)")
	gpuUse := fs.Int("gpu-use-percent", -1, "MODELLED GPU profile: the share of a whole GPU this job keeps busy, 0..100; with it the modelled compute slows down on a shared simulated GPU and scales with the shares held (default $"+EnvGPUUsePercent+"; unset: no profile)")
	hold := fs.Bool("hold", false, "after the last step keep running (answering checkpoint requests) until stopped, for service jobs")
	tokenDefault := defaultTokenFile(getenv)
	tokenFile := fs.String("report-token-file", tokenDefault, "bearer token (workload identity JWT) sent with reports (default: $NOMAD_SECRETS_DIR/nomad_planner.jwt, else $NOMAD_TOKEN_planner, $NOMAD_TOKEN, secrets/nomad_token)")
	reportURL := fs.String("report-url", urlDefault, "planner base URL to report progress to (default $"+progress.EnvURL+"; planners listed in $"+progress.EnvURLsFile+" too; empty and no file: off)")
	if err := fs.Parse(args); err != nil {
		return nil, cli.ParseExit(err), false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "caravan trainer: unexpected arguments %q\n", fs.Args())
		return nil, 2, false
	}
	if err := c.Validate(); err != nil {
		fmt.Fprintf(stderr, "caravan trainer: %v\n", err)
		return nil, 2, false
	}
	ckptSig, ok := signalByName(*sigName)
	if !ok {
		fmt.Fprintf(stderr, "caravan trainer: checkpoint-signal: unknown signal %q\n", *sigName)
		return nil, 2, false
	}
	gpu, err := GPUProfileFromEnv(getenv, *gpuUse)
	if err != nil {
		fmt.Fprintf(stderr, "caravan trainer: %v\n", err)
		return nil, 2, false
	}
	if *dir != "" {
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			fmt.Fprintf(stderr, "caravan trainer: checkpoint-dir: %v\n", err)
			return nil, 1, false
		}
	}
	return &trainerArgs{c: c, env: env, dir: *dir, ckptSig: ckptSig, gpu: gpu, hold: *hold,
		tokenFile: *tokenFile, tokenDefault: tokenDefault, reportURL: *reportURL}, 0, true
}

const trainerUsage = `usage: caravan trainer [flags]
       caravan trainer ps [flags]      a parameter server of an elastic job (caravan trainer ps -h)
       caravan trainer worker [flags]  a worker of an elastic job (caravan trainer worker -h)

Runs the deterministic example trainer, which checkpoints by caravan's
protocol (driver/protocol).

Flags:
`

// setUsage makes fs print head and then its flags, one default each, to w
// (on -h and on a flag error).
func setUsage(fs *flag.FlagSet, w io.Writer, head string) {
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprint(w, head)
		cli.PrintFlags(w, fs)
	}
}

// configFlags registers the flags of c's fields on fs.
func configFlags(fs *flag.FlagSet, c *Config) {
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the dataset, teacher and initial weights")
	fs.IntVar(&c.Samples, "samples", c.Samples, "dataset size")
	fs.IntVar(&c.Features, "features", c.Features, "input features")
	fs.IntVar(&c.Hidden, "hidden", c.Hidden, "hidden units")
	fs.IntVar(&c.Batch, "batch", c.Batch, "mini-batch size (global)")
	fs.IntVar(&c.MicroShards, "micro-shards", c.MicroShards, "fixed micro-shards per batch, reduced in order (the unit of a worker's work)")
	fs.Uint64Var(&c.Steps, "steps", c.Steps, "total SGD steps")
	fs.Float64Var(&c.LR, "lr", c.LR, "learning rate")
	fs.Float64Var(&c.Momentum, "momentum", c.Momentum, "momentum in [0,1)")
	fs.Float64Var(&c.LabelNoise, "label-noise", c.LabelNoise, "fraction of flipped labels in [0,0.5)")
	fs.Uint64Var(&c.LogEvery, "log-every", c.LogEvery, "print progress every N steps (0: never)")
	fs.DurationVar(&c.StepDelay, "step-delay", 0, "sleep after each step (to make a short run last)")
	fs.DurationVar(&c.ComputePerSample, "compute-per-sample", 0, "MODELLED compute: sleep this long per sample processed, standing in for a GPU's time per sample")
}

var signalNames = map[string]syscall.Signal{
	"SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2, "SIGTERM": syscall.SIGTERM,
	"SIGINT": syscall.SIGINT, "SIGHUP": syscall.SIGHUP, "SIGQUIT": syscall.SIGQUIT,
}

func signalByName(name string) (syscall.Signal, bool) {
	n := strings.ToUpper(name)
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	s, ok := signalNames[n]
	return s, ok
}
