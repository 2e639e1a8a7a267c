package progress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// ErrRejected is returned by Report when the planner refused the sample
// (4xx): retrying the same request will not help.
var ErrRejected = errors.New("planner rejected progress report")

// Report sends one sample to a planner. url is the planner's base address
// (e.g. http://127.0.0.1:8095) or the full progress URL; token is the task's
// Nomad workload identity (see TokenFromEnv). A nil client means
// http.DefaultClient.
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
	if !strings.HasSuffix(url, Path) {
		url = strings.TrimRight(url, "/") + Path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
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
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	var eb errorBody
	_ = json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&eb)
	if resp.StatusCode/100 == 4 {
		return fmt.Errorf("%w: HTTP %d: %s", ErrRejected, resp.StatusCode, eb.Error)
	}
	return fmt.Errorf("reporting progress: HTTP %d: %s", resp.StatusCode, eb.Error)
}

// Environment variables and files a task reads its identity token from, in
// order: the named identity "planner" (recommended: audience
// caravan-planner), then the default identity.
const (
	EnvToken        = "NOMAD_TOKEN_planner"
	EnvDefaultToken = "NOMAD_TOKEN"
	EnvURL          = "CARAVAN_PLANNER_URL"
)

// TokenFromEnv finds the task's workload identity: the file
// $NOMAD_SECRETS_DIR/nomad_planner.jwt (kept fresh when the identity has a
// ttl), $NOMAD_TOKEN_planner, then the default identity ($NOMAD_TOKEN or
// $NOMAD_SECRETS_DIR/nomad_token). It returns "" when none is present.
func TokenFromEnv() string {
	secrets := os.Getenv("NOMAD_SECRETS_DIR")
	read := func(name string) string {
		if secrets == "" {
			return ""
		}
		b, err := os.ReadFile(secrets + "/" + name)
		if err != nil {
			return ""
		}
		return string(bytes.TrimSpace(b))
	}
	if v := read("nomad_planner.jwt"); v != "" {
		return v
	}
	if v := os.Getenv(EnvToken); v != "" {
		return v
	}
	if v := os.Getenv(EnvDefaultToken); v != "" {
		return v
	}
	return read("nomad_token")
}
