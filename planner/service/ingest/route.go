package ingest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/caravan-nomad/caravan/planner/service/clock"
)

// TokenVerifier verifies a progress report's bearer token.
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (Identity, error)
}

// Router picks, per token, how to verify it, by what the agent offers
// rather than by its version: a token whose aud names the planner's
// audience (a named identity, Nomad 1.7 and later) is checked offline
// against the agent's JWKS when the agent publishes one; every other token
// (the default workload identity, the only one a Nomad 1.6 agent issues) is
// checked online (OnlineChecker), which works on every agent.
type Router struct {
	JWKS   *Verifier
	Online *OnlineChecker
	// JWKSURL is probed (GET) to learn whether the agent publishes a JWKS:
	// 200 means it does, anything else that it does not (a Nomad 1.6
	// agent answers 404). The answer is kept for ProbeEvery.
	JWKSURL    string
	HTTP       *http.Client
	Clock      clock.Clock
	ProbeEvery time.Duration
	Logger     hclog.Logger

	mu      sync.Mutex
	probeAt time.Time
	offered bool
}

// Verify implements TokenVerifier.
func (r *Router) Verify(ctx context.Context, token string) (Identity, error) {
	if r.JWKS != nil && r.namesPlanner(token) && r.jwksOffered(ctx) {
		return r.JWKS.Verify(ctx, token)
	}
	return r.Online.Verify(ctx, token)
}

// namesPlanner reports whether the token's (unverified) aud includes the
// planner's audience; with no audience configured every token does.
func (r *Router) namesPlanner(token string) bool {
	if r.JWKS.Audience == "" {
		return true
	}
	c, err := peekClaims(token)
	return err == nil && hasAudience(c.Audience, r.JWKS.Audience)
}

func (r *Router) jwksOffered(ctx context.Context) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.Clock.Now()
	if !r.probeAt.IsZero() && now.Sub(r.probeAt) < r.ProbeEvery {
		return r.offered
	}
	offered, err := r.probe(ctx)
	if err != nil {
		r.Logger.Warn("cannot tell whether Nomad publishes a JWKS; checking tokens online", "url", r.JWKSURL, "error", err)
	}
	if r.probeAt.IsZero() || offered != r.offered {
		r.Logger.Info("probed Nomad's JWKS", "url", r.JWKSURL, "offered", offered)
	}
	r.probeAt, r.offered = now, offered
	return offered
}

func (r *Router) probe(ctx context.Context) (bool, error) {
	return JWKSOffered(ctx, r.HTTP, r.JWKSURL)
}

// JWKSOffered asks the agent at url (its /.well-known/jwks.json) whether it
// publishes workload-identity keys: 200 yes, 404 no (Nomad before 1.7),
// anything else an error. A nil hc is http.DefaultClient.
func JWKSOffered(ctx context.Context, hc *http.Client, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	default:
		return false, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
}
