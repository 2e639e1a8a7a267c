package trainer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/caravan-nomad/caravan/driver/protocol"
	"github.com/caravan-nomad/caravan/internal/cli"
	"github.com/caravan-nomad/caravan/progress"
)

// peerFlags are how a parameter server or worker finds the coordinator.
type peerFlags struct {
	coordinator, peersFile, tag string
}

func (p *peerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.coordinator, "coordinator", "", "address of the coordinating parameter server (instead of -peers-file)")
	fs.StringVar(&p.peersFile, "peers-file", "", "file of \"ADDR:PORT TAG,...\" lines, one per parameter server, rendered by a Nomad template from nomadService; re-read whenever the coordinator is lost")
	fs.StringVar(&p.tag, "coordinator-tag", "index-0", "service tag of the coordinating parameter server in -peers-file")
}

func (p *peerFlags) locator() (Locator, error) {
	switch {
	case p.coordinator != "" && p.peersFile != "":
		return nil, errors.New("coordinator and peers-file: give one")
	case p.coordinator != "":
		return StaticLocator(p.coordinator), nil
	case p.peersFile != "":
		return FileLocator{Path: p.peersFile, Tag: p.tag}, nil
	}
	return nil, errors.New("coordinator or peers-file is required")
}

func stoppedCode(exitSig *atomic.Int32) int {
	if s := exitSig.Load(); s != 0 {
		return 128 + int(s)
	}
	return 1
}

// runPS runs `caravan trainer ps`: the coordinator when -index is 0, a
// shard server otherwise.
func runPS(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c := DefaultConfig()
	env, err := protocol.FromEnv(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "caravan trainer ps: %v\n", err)
		return 2
	}
	fs := flag.NewFlagSet("caravan trainer ps", flag.ContinueOnError)
	setUsage(fs, stderr, "usage: caravan trainer ps [flags]\n\nRuns a parameter server of an elastic training job.\n\nFlags:\n")
	configFlags(fs, &c)
	var peers peerFlags
	peers.register(fs)
	listenAddr := fs.String("listen", "127.0.0.1:0", "address to serve workers (and, on the coordinator, members) on, e.g. ${NOMAD_ADDR_ps}")
	advertise := fs.String("advertise", "", "address peers dial (default: the listen address)")
	index := fs.Int("index", envInt(getenv, "NOMAD_ALLOC_INDEX"), "this server's index; 0 coordinates (default $NOMAD_ALLOC_INDEX)")
	dir := fs.String("checkpoint-dir", env.Dir, "checkpoint directory (default $"+protocol.EnvDir+")")
	sigName := fs.String("checkpoint-signal", orDefault(env.Signal, "SIGUSR1"), "signal that asks for a checkpoint (default $"+protocol.EnvSignal+" or SIGUSR1)")
	rep := reportFlags(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return cli.ParseExit(err)
	}
	loc, err := peers.locator() // the coordinator needs none
	if *index == 0 {
		err = c.Validate()
	}
	ckptSig, ok := signalByName(*sigName)
	if err == nil && !ok {
		err = fmt.Errorf("checkpoint-signal: unknown signal %q", *sigName)
	}
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err != nil {
		fmt.Fprintf(stderr, "caravan trainer ps: %v\n", err)
		return 2
	}
	ln, err := net.Listen("tcp", *listenAddr)
	if err != nil {
		fmt.Fprintf(stderr, "caravan trainer ps: listen: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reqs, exitSig := checkpointRequests(ctx, ckptSig, *dir)
	o := ServerOptions{Listener: ln, Advertise: *advertise, Coordinator: loc, Dir: *dir, MinSequence: env.Sequence, Out: stdout,
		Identity: Progress{Job: getenv("NOMAD_JOB_ID"), Alloc: getenv("NOMAD_ALLOC_ID"), Task: getenv("NOMAD_TASK_NAME")}}
	if *index != 0 {
		return runShard(ctx, cancel, o, reqs, exitSig, stderr)
	}
	o.Requests = reqs
	if o.Reporter, err = rep.reporter(); err != nil {
		fmt.Fprintf(stderr, "caravan trainer ps: %v\n", err)
		return 2
	}
	res, err := RunCoordinator(ctx, c, o)
	if err != nil {
		fmt.Fprintf(stderr, "caravan trainer ps: %v\n", err)
		return 1
	}
	if res.Interrupted {
		return stoppedCode(exitSig)
	}
	return 0
}

func runShard(ctx context.Context, cancel context.CancelFunc, o ServerOptions, reqs <-chan Request, exitSig *atomic.Int32, stderr io.Writer) int {
	go AnswerWithSkips(ctx, o.Dir, o.MinSequence, reqs, o.Out, func(Request) { cancel() })
	err := RunShardServer(ctx, o)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrStopped):
		return stoppedCode(exitSig)
	}
	fmt.Fprintf(stderr, "caravan trainer ps: %v\n", err)
	return 1
}

// runWorker runs `caravan trainer worker`.
func runWorker(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("caravan trainer worker", flag.ContinueOnError)
	setUsage(fs, stderr, "usage: caravan trainer worker [flags]\n\nRuns a worker of an elastic training job.\n\nFlags:\n")
	var peers peerFlags
	peers.register(fs)
	cps := fs.Duration("compute-per-sample", 0, "MODELLED compute: sleep this long per sample (default: the job's, set on the parameter servers)")
	gpuUse := fs.Int("gpu-use-percent", -1, "MODELLED GPU profile, as caravan trainer's (default $"+EnvGPUUsePercent+"; unset: no profile)")
	if err := fs.Parse(args); err != nil {
		return cli.ParseExit(err)
	}
	loc, err := peers.locator()
	var gpu GPUProfile
	if err == nil {
		gpu, err = GPUProfileFromEnv(getenv, *gpuUse)
	}
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err == nil && *cps < 0 {
		err = errors.New("compute-per-sample must not be negative")
	}
	if err != nil {
		fmt.Fprintf(stderr, "caravan trainer worker: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := getenv(protocol.EnvDir)
	reqs, exitSig := checkpointRequests(ctx, syscall.SIGUSR1, dir)
	go AnswerWithSkips(ctx, dir, 0, reqs, stdout, func(Request) { cancel() })
	fmt.Fprintf(stdout, "worker starting alloc_index=%s\n", getenv("NOMAD_ALLOC_INDEX"))
	err = RunWorker(ctx, WorkerOptions{Coordinator: loc, Out: stdout, ComputePerSample: *cps, GPU: gpu})
	if errors.Is(err, ErrStopped) {
		return stoppedCode(exitSig)
	}
	return 0
}

// reportOpts are the progress-report flags.
type reportOpts struct {
	url, urlsFile, tokenFile *string
	tokenDefault             string
	getenv                   func(string) string
}

func reportFlags(fs *flag.FlagSet, getenv func(string) string) *reportOpts {
	r := &reportOpts{tokenDefault: defaultTokenFile(getenv), getenv: getenv}
	r.tokenFile = fs.String("report-token-file", r.tokenDefault, "bearer token (workload identity JWT) sent with reports (default: the task's planner identity)")
	r.url = fs.String("report-url", progress.URLFromEnv(getenv), "planner base URL to report the job's progress to (default $"+progress.EnvURL+"; empty and no file: off)")
	r.urlsFile = fs.String("report-urls-file", getenv(progress.EnvURLsFile), "a file of planner base URLs, one a line, re-read on every report (default $"+progress.EnvURLsFile+")")
	return r
}

func (r *reportOpts) reporter() (Reporter, error) {
	return newReporter(*r.url, *r.urlsFile, *r.tokenFile, r.tokenDefault, r.getenv)
}

func envInt(getenv func(string) string, name string) int {
	n, err := strconv.Atoi(getenv(name))
	if err != nil {
		return 0
	}
	return n
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
