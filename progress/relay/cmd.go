package relay

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/caravan-nomad/caravan/progress"
)

type urlList []string

func (u *urlList) String() string     { return strings.Join(*u, ",") }
func (u *urlList) Set(v string) error { *u = append(*u, v); return nil }

// Main runs `caravan planner relay ...`: a sidecar that follows a training
// task's log and reports its progress lines.
func Main(args []string, getenv func(string) string, stderr io.Writer) int {
	fs := flag.NewFlagSet("caravan planner relay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	var urls urlList
	fs.StringVar(&cfg.File, "file", "", "log to follow, e.g. ${NOMAD_ALLOC_DIR}/logs/train.stdout (rotations .0, .1, ... are followed)")
	fs.Var(&urls, "url", "planner address (repeatable; default $"+progress.EnvURL+")")
	fs.StringVar(&cfg.URLsFile, "urls-file", getenv(progress.EnvURLsFile), "file listing planner addresses, one per line, re-read before each report (default $"+progress.EnvURLsFile+")")
	fs.DurationVar(&cfg.Every, "every", 2*time.Second, "least time between two reports")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "caravan planner relay: unexpected argument %q (flags go before arguments; see -h)\n", fs.Arg(0))
		return 2
	}
	if cfg.Every <= 0 {
		fmt.Fprintf(stderr, "caravan planner relay: -every: must be greater than 0, got %s\n", cfg.Every)
		return 2
	}
	if cfg.File == "" {
		fmt.Fprintln(stderr, "caravan planner relay: -file is required")
		return 2
	}
	if len(urls) == 0 && cfg.URLsFile == "" {
		u := progress.URLFromEnv(getenv)
		if u == "" {
			fmt.Fprintf(stderr, "caravan planner relay: set -url, -urls-file, $%s or $%s\n", progress.EnvURL, progress.EnvURLsFile)
			return 2
		}
		urls = append(urls, u)
	}
	cfg.URLs = urls
	cfg.Stderr = stderr
	cfg.Token = func() string { return progress.TokenFrom(getenv) }
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := Run(ctx, cfg); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "caravan planner relay:", err)
		return 1
	}
	return 0
}
