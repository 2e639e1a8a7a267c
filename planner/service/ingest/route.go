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
	// agent answers 404). The answer is kept for ProbeEvery; a stale
	// answer is still given while the next probe runs in the background.
	JWKSURL    string
	HTTP       *http.Client
	Clock      clock.Clock
	ProbeEvery time.Duration
	Logger     hclog.Logger

	mu      sync.Mutex
	probeAt time.Time     // start of the probe that answered last
	offered bool          // its answer
	probing chan struct{} // non-nil while a probe runs; closed when it ends
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

// jwksOffered reports whether the agent publishes a JWKS. The probe runs
// outside the lock, one at a time: once a probe has answered, callers get
// that answer at once, and a stale answer starts the next probe in the
// background; only the callers before the first answer wait for it (or for
// ctx, then the token is checked online).
func (r *Router) jwksOffered(ctx context.Context) bool {
	r.mu.Lock()
	now := r.Clock.Now()
	answered := !r.probeAt.IsZero()
	if answered && now.Sub(r.probeAt) < r.ProbeEvery {
		defer r.mu.Unlock()
		return r.offered
	}
	done := r.probing
	if done == nil {
		done = r.startProbe(now)
	}
	offered := r.offered
	r.mu.Unlock()
	if answered {
		return offered // the last answer stands until the next one
	}
	select {
	case <-done:
	case <-ctx.Done():
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.offered
}

// probeTimeout bounds one probe (it does not end when the caller that
// started it gives up: others may be waiting for it).
const probeTimeout = 10 * time.Second

// startProbe probes the JWKS URL in the background and returns a channel
// closed when the answer is kept; r.mu is held.
func (r *Router) startProbe(now time.Time) chan struct{} {
	done := make(chan struct{})
	r.probing = done
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		offered, err := r.probe(ctx)
		if err != nil {
			r.Logger.Warn("cannot tell whether Nomad publishes a JWKS; checking tokens online", "url", r.JWKSURL, "error", err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.probeAt.IsZero() || offered != r.offered {
			r.Logger.Info("probed Nomad's JWKS", "url", r.JWKSURL, "offered", offered)
		}
		r.probeAt, r.offered, r.probing = now, offered, nil
	}()
	return done
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
