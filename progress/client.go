package progress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Path is where tasks POST their progress.
const Path = "/v1/progress"

// ErrRejected is returned by Report when the planner refused the sample
// (4xx): retrying the same request will not help.
var ErrRejected = errors.New("planner rejected progress report")

// ErrorBody is the planner's JSON error response.
type ErrorBody struct {
	Error string `json:"error"`
	// Field names the sample field at fault, for a 400.
	Field string `json:"field,omitempty"`
}

// Report sends one sample to a planner. url is the planner's base address
// (e.g. http://127.0.0.1:8095) or the full progress URL; token is the task's
// Nomad workload identity (see TokenFromEnv). A nil client means
// http.DefaultClient. The sample is validated first.
func Report(ctx context.Context, hc *http.Client, url, token string, s Sample) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	body, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding progress: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, progressURL(url), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building progress request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("reporting progress: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxBody))
		return nil
	}
	var eb ErrorBody
	_ = json.NewDecoder(io.LimitReader(resp.Body, MaxBody)).Decode(&eb)
	if resp.StatusCode/100 == 4 {
		return fmt.Errorf("%w: HTTP %d: %s", ErrRejected, resp.StatusCode, eb.Error)
	}
	return fmt.Errorf("reporting progress: HTTP %d: %s", resp.StatusCode, eb.Error)
}

func progressURL(base string) string {
	if strings.HasSuffix(base, Path) {
		return base
	}
	return strings.TrimRight(base, "/") + Path
}

// Client reports to every planner instance a task knows of (so followers'
// models are warm when they take over), with a fresh token each time
// (Nomad renews it). Its zero value reads everything from the environment.
type Client struct {
	// URLs lists the planners (default URLsFromEnv(os.Getenv)).
	URLs func() []string
	// Token returns the workload identity (default TokenFromEnv).
	Token func() string
	// HTTP is the client (default: a 5 s timeout).
	HTTP *http.Client

	once sync.Once
}

func (c *Client) init() {
	c.once.Do(func() {
		if c.URLs == nil {
			c.URLs = func() []string { return URLsFromEnv(osGetenv) }
		}
		if c.Token == nil {
			c.Token = TokenFromEnv
		}
		if c.HTTP == nil {
			c.HTTP = &http.Client{Timeout: 5 * time.Second}
		}
	})
}

// Errors of Client.Report that mean "not configured" rather than "failed".
var (
	ErrNoURL   = errors.New("no planner address: set $" + EnvURL + " or $" + EnvURLsFile)
	ErrNoToken = errors.New("no workload identity: give the task an identity block named \"planner\"")
)

// Report sends s to every planner; it returns the joined errors (nil when
// all accepted it). Callers training a model log the error once and carry
// on: reporting must never stop training.
func (c *Client) Report(ctx context.Context, s Sample) error {
	c.init()
	urls := c.URLs()
	if len(urls) == 0 {
		return ErrNoURL
	}
	token := c.Token()
	if token == "" {
		return ErrNoToken
	}
	var errs []error
	for _, u := range urls {
		if err := Report(ctx, c.HTTP, u, token, s); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, err))
		}
	}
	return errors.Join(errs...)
}
