package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/caravan-nomad/caravan/planner/service/progress"
)

// reportMain runs `caravan planner report ...`: one progress report from a
// shell-scripted task, with the task's workload identity read from its
// environment (see progress.TokenFromEnv).
func reportMain(args []string, getenv func(string) string, stderr io.Writer) int {
	fs := flag.NewFlagSet("caravan planner report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", getenv(progress.EnvURL), "planner address (default $"+progress.EnvURL+")")
	var s progress.Sample
	fs.Int64Var(&s.Step, "step", 0, "global training step")
	fs.Float64Var(&s.Loss, "loss", 0, "training loss at that step")
	fs.Float64Var(&s.SamplesPerSec, "samples-per-sec", 0, "this task's throughput")
	fs.Float64Var(&s.StepsPerSec, "steps-per-sec", 0, "step rate, if known")
	fs.IntVar(&s.BatchSize, "batch-size", 0, "global batch size, if known")
	fs.BoolVar(&s.Checkpointed, "checkpointed", false, "a checkpoint was just committed")
	fs.BoolVar(&s.Done, "done", false, "training finished")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *url == "" {
		fmt.Fprintf(stderr, "caravan planner report: no planner address: set -url or $%s\n", progress.EnvURL)
		return 2
	}
	token := progress.TokenFromEnv()
	if token == "" {
		fmt.Fprintln(stderr, "caravan planner report: no workload identity: give the task an identity block named \"planner\" (env or file), see planner/README.md")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := progress.Report(ctx, &http.Client{}, *url, token, s); err != nil {
		fmt.Fprintln(stderr, "caravan planner report:", err)
		return 1
	}
	return 0
}
