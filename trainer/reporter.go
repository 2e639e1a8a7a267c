package trainer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/caravan-nomad/caravan/progress"
)

// Progress is one progress report as the training loop produces it. Job,
// Alloc and Task only label local output: the planner takes the job from
// the token. On the wire it is a progress.Sample (see Sample).
type Progress struct {
	Job           string
	Alloc         string
	Task          string
	Step          uint64
	StepsTotal    uint64
	Loss          float64
	SamplesPerSec float64
	StepsPerSec   float64
	BatchSize     int
	// Workers and PS are the data-parallel workers and parameter servers
	// that produced SamplesPerSec (0: not known, e.g. a single process).
	Workers int
	PS      int
	// GradSqr and GradVar are the gradient statistics of the window
	// (GradStats.Estimate); both 0 when not measured.
	GradSqr, GradVar float64
	Checkpointed     bool
	Done             bool
	Time             time.Time
}

// Sample is the report in the planner's progress wire.
func (p Progress) Sample() progress.Sample {
	clamp := func(v uint64) int64 { return int64(min(v, math.MaxInt64)) }
	return progress.Sample{
		Step: clamp(p.Step), StepsTotal: clamp(p.StepsTotal), Loss: p.Loss,
		SamplesPerSec: p.SamplesPerSec, StepsPerSec: p.StepsPerSec, BatchSize: p.BatchSize,
		Workers: p.Workers, PS: p.PS, GradSqr: p.GradSqr, GradVar: p.GradVar,
		Checkpointed: p.Checkpointed, Done: p.Done,
	}
}

// Reporter receives progress. Report must not block training for long;
// errors are logged and otherwise ignored.
type Reporter interface {
	Report(ctx context.Context, p Progress) error
}

// nopReporter drops reports (no -report-url).
type nopReporter struct{}

func (nopReporter) Report(context.Context, Progress) error { return nil }

// HTTPReporter sends each report to the planner(s) with progress.Client.
// It returns an error only when reporting starts failing (the first
// failure, or the first after a success), so the caller's log carries one
// line per outage, not one per report: reporting never stops training.
type HTTPReporter struct {
	Client *progress.Client

	mu      sync.Mutex
	failing bool
}

// NewHTTPReporter reports to urls() with the token token() returns (both
// re-read for every report: Nomad renews the token, and a URLs file lists
// the healthy planner instances), with a short per-request timeout.
func NewHTTPReporter(urls func() []string, token func() string) *HTTPReporter {
	return &HTTPReporter{Client: &progress.Client{URLs: urls, Token: token, HTTP: &http.Client{Timeout: 2 * time.Second}}}
}

// TokenFromFile reads a token file on every call ("" if unreadable).
func TokenFromFile(path string) func() string {
	return func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
}

func (r *HTTPReporter) Report(ctx context.Context, p Progress) error {
	err := r.Client.Report(ctx, p.Sample())
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.failing
	r.failing = err != nil
	if err == nil || was {
		return nil
	}
	if errors.Is(err, progress.ErrNoToken) || errors.Is(err, progress.ErrNoURL) {
		return err
	}
	return errors.Join(err, errors.New("(reported once; training carries on)"))
}

// asyncReporter runs a Reporter off the training goroutine, keeping only the
// newest pending report so a slow endpoint never slows training.
type asyncReporter struct {
	next  Reporter
	ch    chan Progress
	done  chan struct{}
	errFn func(error)
}

func newAsyncReporter(ctx context.Context, next Reporter, errFn func(error)) *asyncReporter {
	a := &asyncReporter{next: next, ch: make(chan Progress, 1), done: make(chan struct{}), errFn: errFn}
	go func() {
		defer close(a.done)
		for p := range a.ch {
			if err := a.next.Report(ctx, p); err != nil && a.errFn != nil {
				a.errFn(err)
			}
		}
	}()
	return a
}

func (a *asyncReporter) Report(p Progress) {
	select {
	case a.ch <- p:
	default:
		select { // replace the stale pending report
		case <-a.ch:
		default:
		}
		select {
		case a.ch <- p:
		default:
		}
	}
}

func (a *asyncReporter) Close() {
	close(a.ch)
	<-a.done
}

// defaultTokenFile is the task's planner identity file
// ($NOMAD_SECRETS_DIR/nomad_planner.jwt), "" outside Nomad.
func defaultTokenFile(getenv func(string) string) string {
	if d := getenv(progress.EnvSecretsDir); d != "" {
		return filepath.Join(d, progress.TokenFile)
	}
	return ""
}

// newReporter reports to url and to every planner listed in urlsFile
// (re-read at each report), with the token of tokenFile when it was given
// explicitly, else the identity the wire package finds. It returns nil
// (no reporting) when neither url nor urlsFile is set, and an error naming
// the flag when an explicit token file is unreadable.
func newReporter(url, urlsFile, tokenFile, tokenDefault string, getenv func(string) string) (Reporter, error) {
	if url == "" && urlsFile == "" {
		return nil, nil
	}
	token := func() string { return progress.TokenFrom(getenv) }
	if tokenFile != "" && tokenFile != tokenDefault {
		if _, err := os.Stat(tokenFile); err != nil {
			return nil, fmt.Errorf("report-token-file: %w", err)
		}
		token = TokenFromFile(tokenFile)
	}
	urls := func() []string {
		list := progress.ReadURLsFile(urlsFile)
		if url != "" {
			list = append(list, url)
		}
		return list
	}
	return NewHTTPReporter(urls, token), nil
}
