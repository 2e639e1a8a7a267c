// Package report is `caravan planner report`: one progress report from a
// shell-scripted task, with the task's workload identity read from its
// environment (progress.TokenFrom).
package report

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/caravan-nomad/caravan/progress"
)

// Main runs `caravan planner report ...`. It exits 0 when every planner
// accepted the sample, 1 when one refused it or could not be reached, 2 on
// bad flags or a missing address or identity.
func Main(args []string, getenv func(string) string, stderr io.Writer) int {
	fs := flag.NewFlagSet("caravan planner report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", progress.URLFromEnv(getenv), "planner address (default $"+progress.EnvURL+"; with $"+progress.EnvURLsFile+" every planner listed there too)")
	var s progress.Sample
	fs.Int64Var(&s.Step, "step", 0, "global training step")
	fs.Float64Var(&s.Loss, "loss", 0, "training loss at that step")
	fs.Float64Var(&s.SamplesPerSec, "samples-per-sec", 0, "the job's throughput")
	fs.Float64Var(&s.StepsPerSec, "steps-per-sec", 0, "step rate, if known")
	fs.IntVar(&s.BatchSize, "batch-size", 0, "global batch size, if known")
	fs.Int64Var(&s.StepsTotal, "steps-total", 0, "declared total steps, if known")
	fs.IntVar(&s.Workers, "workers", 0, "workers that produced this speed, if known")
	fs.IntVar(&s.PS, "ps", 0, "parameter servers at measurement, if known")
	fs.Int64Var(&s.GPUMemoryPeakBytes, "gpu-memory-peak-bytes", 0, "most GPU memory one worker process allocated, if measured")
	fs.BoolVar(&s.GPUOutOfMemory, "gpu-out-of-memory", false, "the task is about to exit because its GPU ran out of memory")
	fs.BoolVar(&s.Checkpointed, "checkpointed", false, "a checkpoint was just committed")
	fs.BoolVar(&s.Done, "done", false, "training finished")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "caravan planner report: unexpected argument %q (flags go before arguments; see -h)\n", fs.Arg(0))
		return 2
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "caravan planner report: -timeout: must be greater than 0, got %s\n", *timeout)
		return 2
	}
	urls := progress.URLsFromEnv(getenv)
	if *url != "" && *url != progress.URLFromEnv(getenv) {
		urls = []string{*url} // an explicit -url wins
	}
	if len(urls) == 0 {
		fmt.Fprintf(stderr, "caravan planner report: no planner address: set -url, $%s or $%s\n", progress.EnvURL, progress.EnvURLsFile)
		return 2
	}
	if err := s.Validate(); err != nil {
		fmt.Fprintln(stderr, "caravan planner report:", err)
		return 2
	}
	c := &progress.Client{
		URLs:  func() []string { return urls },
		Token: func() string { return progress.TokenFrom(getenv) },
		HTTP:  &http.Client{},
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	err := c.Report(ctx, s)
	switch {
	case errors.Is(err, progress.ErrNoToken):
		fmt.Fprintln(stderr, "caravan planner report:", err, "(env or file), see planner/README.md")
		return 2
	case err != nil:
		fmt.Fprintln(stderr, "caravan planner report:", err)
		return 1
	}
	return 0
}
