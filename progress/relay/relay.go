package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/caravan-nomad/caravan/progress"
)

// Clock is the relay's notion of time (the planner's clock.Real and
// clock.Fake fit it).
type Clock interface {
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config configures a relay.
type Config struct {
	// File is the log to follow (or the prefix of rotated logs).
	File string
	// URLs are planner addresses; URLsFile, if set, is re-read before every
	// report (one URL per line; a Nomad template listing the healthy
	// instances from Consul).
	URLs     []string
	URLsFile string
	// Every is the least time between two reports (the newest sample wins).
	Every time.Duration
	// Token returns the workload identity to present (re-read each time:
	// Nomad renews it). Defaults to progress.TokenFromEnv.
	Token  func() string
	HTTP   *http.Client
	Clock  Clock
	Poll   time.Duration
	Stderr io.Writer
}

// Run relays until ctx ends. It returns ctx.Err() then, or an error that
// makes relaying impossible (the log cannot be read).
func Run(ctx context.Context, cfg Config) error {
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Token == nil {
		cfg.Token = progress.TokenFromEnv
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 5 * time.Second}
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.Every <= 0 {
		cfg.Every = 2 * time.Second
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	r := &relay{cfg: cfg, wake: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); r.send(ctx) }()

	f := &follower{path: cfg.File, clk: cfg.Clock, poll: cfg.Poll}
	defer f.Close()
	var err error
	for {
		var line string
		line, err = f.Next(ctx)
		if err != nil {
			break
		}
		s, ok, ckpt := ParseLine(line)
		r.mu.Lock()
		switch {
		case ok:
			s.Checkpointed = r.pending != nil && r.pending.Checkpointed
			r.pending = &s
		case ckpt && r.pending != nil:
			r.pending.Checkpointed = true
		case ckpt && r.last != nil:
			cp := *r.last
			cp.Step, cp.Checkpointed = max(cp.Step, s.Step), true
			r.pending = &cp
		}
		urgent := r.pending != nil && r.pending.Done
		r.mu.Unlock()
		if urgent {
			r.poke()
		}
	}
	cancel()
	<-done
	if errors.Is(err, context.Canceled) {
		return ctx.Err()
	}
	return err
}

type relay struct {
	cfg     Config
	mu      sync.Mutex
	pending *progress.Sample
	last    *progress.Sample
	wake    chan struct{}
	errs    int
}

func (r *relay) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// send reports the newest pending sample every cfg.Every.
func (r *relay) send(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			r.flush(context.Background()) // the last word, e.g. "final"
			return
		case <-r.cfg.Clock.After(r.cfg.Every):
		case <-r.wake:
		}
		r.flush(ctx)
	}
}

func (r *relay) flush(ctx context.Context) {
	r.mu.Lock()
	s := r.pending
	r.pending = nil
	r.mu.Unlock()
	if s == nil {
		return
	}
	token := r.cfg.Token()
	if token == "" {
		r.complain(errors.New("no workload identity (give the task an identity named \"planner\")"))
		return
	}
	urls := r.urls()
	if len(urls) == 0 {
		r.complain(errors.New("no planner address yet"))
	}
	for _, u := range urls {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := progress.Report(ctx, r.cfg.HTTP, u, token, *s)
		cancel()
		if err != nil {
			r.complain(fmt.Errorf("%s: %w", u, err))
		}
	}
	r.mu.Lock()
	r.last = s
	r.mu.Unlock()
}

// complain writes errors to stderr, but not more than a few per minute.
func (r *relay) complain(err error) {
	r.errs++
	if r.errs <= 5 || r.errs%30 == 0 {
		fmt.Fprintf(r.cfg.Stderr, "caravan planner relay: %v\n", err)
	}
}

func (r *relay) urls() []string {
	urls := append([]string(nil), r.cfg.URLs...)
	if r.cfg.URLsFile != "" {
		urls = append(urls, progress.ReadURLsFile(r.cfg.URLsFile)...)
	}
	return urls
}
