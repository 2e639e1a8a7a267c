package trainer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// Progress is one progress report, in the planner's progress protocol
// (planner/README.md: POST /v1/progress). Job, Alloc and Task only label
// local output: the planner takes the job from the token.
type Progress struct {
	Job           string    `json:"-"`
	Alloc         string    `json:"-"`
	Task          string    `json:"-"`
	Step          uint64    `json:"step"`
	StepsTotal    uint64    `json:"steps_total"`
	Loss          float64   `json:"loss"`
	SamplesPerSec float64   `json:"samples_per_sec"`
	StepsPerSec   float64   `json:"steps_per_sec"`
	BatchSize     int       `json:"batch_size"`
	Workers       int       `json:"workers,omitempty"`
	PS            int       `json:"ps,omitempty"`
	Checkpointed  bool      `json:"checkpointed"`
	Done          bool      `json:"done"`
	Time          time.Time `json:"time"`
}

// Reporter receives progress. Report must not block training for long;
// errors are logged and otherwise ignored.
type Reporter interface {
	Report(ctx context.Context, p Progress) error
}

// nopReporter drops reports (no -report-url).
type nopReporter struct{}

func (nopReporter) Report(context.Context, Progress) error { return nil }

// HTTPReporter POSTs each report as JSON to URL (the planner's
// /v1/progress on 127.0.0.1), with the task's workload identity as a bearer
// token when TokenFile is set (re-read on every report: Nomad renews it).
type HTTPReporter struct {
	URL       string
	TokenFile string
	Client    *http.Client
}

// NewHTTPReporter returns a reporter with a short per-request timeout.
func NewHTTPReporter(url, tokenFile string) *HTTPReporter {
	return &HTTPReporter{URL: url, TokenFile: tokenFile, Client: &http.Client{Timeout: 2 * time.Second}}
}

func (r *HTTPReporter) Report(ctx context.Context, p Progress) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if r.TokenFile != "" {
		tok, err := os.ReadFile(r.TokenFile)
		if err != nil {
			return fmt.Errorf("progress token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := r.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("progress report to %s: %s", r.URL, resp.Status)
	}
	return nil
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
