package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/clock"
	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
)

// unsignedToken is a compact JWS with the given claims and a signature only
// Nomad (here the fake) can judge: the online check never looks at it.
func unsignedToken(claims map[string]any, sig string) string {
	hdr, _ := json.Marshal(map[string]string{"alg": "EdDSA", "typ": "JWT", "kid": "k1"})
	body, _ := json.Marshal(claims)
	return b64.EncodeToString(hdr) + "." + b64.EncodeToString(body) + "." + b64.EncodeToString([]byte(sig))
}

// v16Claims are a Nomad 1.6 default identity's claims: nbf and iat, no exp,
// aud or iss.
func v16Claims(ns, job, alloc string, now time.Time) map[string]any {
	return map[string]any{
		"nomad_namespace": ns, "nomad_job_id": job, "nomad_allocation_id": alloc, "nomad_task": "train",
		"nbf": now.Unix(), "iat": now.Unix(),
	}
}

const readVar = "GET /v1/var/nomad/jobs/"

func newOnline(t *testing.T, clk clock.Clock) (*OnlineChecker, *fakenomad.Server) {
	t.Helper()
	nomad := fakenomad.New()
	t.Cleanup(nomad.Close)
	nomad.SetACLs(true)
	return &OnlineChecker{Client: nomad.Client(), Clock: clk, Logger: hclog.NewNullLogger(), TTL: time.Minute}, nomad
}

// The adversarial cases, as Nomad answers them: only a token Nomad accepts
// as the identity of the job its claims name is accepted.
func TestOnlineChecker(t *testing.T) {
	now := time.Now()
	clk := clock.NewFake(now)
	o, nomad := newOnline(t, clk)
	good := unsignedToken(v16Claims("default", "train-a", "alloc-a", now), "good")
	nomad.AddIdentity(good, "default", "train-a")
	// Nomad's grant follows the verified claims; a token whose claims name
	// a job its signature does not cover is a forgery.
	forged := unsignedToken(v16Claims("default", "train-a", "alloc-a", now), "forged")
	otherJob := unsignedToken(v16Claims("default", "train-a", "alloc-b", now), "other-job")
	nomad.AddIdentity(otherJob, "default", "train-b")
	otherNS := unsignedToken(v16Claims("team", "train-a", "alloc-a", now), "other-ns")
	nomad.AddIdentity(otherNS, "default", "train-a")
	expired := v16Claims("default", "train-a", "alloc-a", now)
	expired["exp"] = now.Add(-time.Hour).Unix()
	expiredTok := unsignedToken(expired, "good")
	nomad.AddIdentity(expiredTok, "default", "train-a")
	noJob := v16Claims("default", "", "alloc-a", now)

	cases := []struct {
		name, token string
		want        string // "" accepted; else a substring of the 401
	}{
		{"own job's identity", good, ""},
		{"forged signature", forged, "Nomad refused the token"},
		{"another job's token", otherJob, "Nomad refused the token"},
		{"another namespace", otherNS, "Nomad refused the token"},
		{"expired", expiredTok, "expired"},
		{"no job claim", unsignedToken(noJob, "x"), "not a workload identity"},
		{"not a JWS", "abc", "not a compact JWS"},
		{"payload not JSON", "eyJhIjoxfQ.bm90LWpzb24.c2ln", "not JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, err := o.Verify(context.Background(), tc.token)
			if tc.want == "" {
				must.NoError(t, err)
				must.Eq(t, Identity{Namespace: "default", JobID: "train-a", AllocationID: "alloc-a", Task: "train"}, id)
				return
			}
			must.ErrorIs(t, err, ErrUnauthenticated)
			must.StrContains(t, err.Error(), tc.want)
		})
	}
}

// Answers are cached per token for the TTL: a stopped allocation's token,
// which Nomad refuses from then on, is refused once the entry expires (the
// planner's own allocation check refuses it sooner: agent.go).
func TestOnlineChecker_CachePerTokenForTTL(t *testing.T) {
	now := time.Now()
	clk := clock.NewFake(now)
	o, nomad := newOnline(t, clk)
	tok := unsignedToken(v16Claims("default", "train-a", "alloc-a", now), "good")
	nomad.AddIdentity(tok, "default", "train-a")
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		_, err := o.Verify(ctx, tok)
		must.NoError(t, err)
	}
	must.Eq(t, 1, nomad.RequestCount(readVar+"train-a"))

	nomad.RevokeIdentity(tok) // its allocation stopped
	_, err := o.Verify(ctx, tok)
	must.NoError(t, err, must.Sprint("still cached"))
	clk.Advance(time.Minute)
	_, err = o.Verify(ctx, tok)
	must.ErrorIs(t, err, ErrUnauthenticated)
	must.Eq(t, 2, nomad.RequestCount(readVar+"train-a"))
	_, err = o.Verify(ctx, tok) // the refusal is cached too
	must.ErrorIs(t, err, ErrUnauthenticated)
	must.Eq(t, 2, nomad.RequestCount(readVar+"train-a"))
}

func TestOnlineChecker_CacheIsBounded(t *testing.T) {
	now := time.Now()
	clk := clock.NewFake(now)
	o, nomad := newOnline(t, clk)
	o.MaxEntries = 4
	for i := 0; i < 10; i++ {
		tok := unsignedToken(v16Claims("default", "train-a", "alloc-a", now), string(rune('a'+i)))
		nomad.AddIdentity(tok, "default", "train-a")
		_, err := o.Verify(context.Background(), tok)
		must.NoError(t, err)
		must.LessEq(t, 4, o.cacheLen())
	}
}

// Nomad unreachable: not a refusal (the handler answers 503), and nothing
// is cached.
func TestOnlineChecker_NomadDown(t *testing.T) {
	now := time.Now()
	o, nomad := newOnline(t, clock.NewFake(now))
	tok := unsignedToken(v16Claims("default", "train-a", "alloc-a", now), "good")
	nomad.AddIdentity(tok, "default", "train-a")
	nomad.SetDown(true)
	_, err := o.Verify(context.Background(), tok)
	must.Error(t, err)
	must.False(t, errors.Is(err, ErrUnauthenticated))
	nomad.SetDown(false)
	_, err = o.Verify(context.Background(), tok)
	must.NoError(t, err)
}

// An agent without ACLs checks no token: claims are accepted marked
// Unverified, with an error logged (once per TTL), or refused when
// RefuseWithoutACLs is set. Never silently.
func TestOnlineChecker_WithoutACLs(t *testing.T) {
	now := time.Now()
	clk := clock.NewFake(now)
	o, nomad := newOnline(t, clk)
	nomad.SetACLs(false)
	var logged int
	o.Logger = hclog.New(&hclog.LoggerOptions{Output: countWriter{&logged}, Level: hclog.Error})
	tok := unsignedToken(v16Claims("default", "train-a", "alloc-a", now), "anything")

	id, err := o.Verify(context.Background(), tok)
	must.NoError(t, err)
	must.True(t, id.Unverified)
	must.Eq(t, "train-a", id.JobID)
	must.Eq(t, 1, logged)
	_, _ = o.Verify(context.Background(), tok)
	must.Eq(t, 1, logged, must.Sprint("warned once per TTL"))
	must.Zero(t, nomad.RequestCount(readVar+"train-a"), must.Sprint("nothing to ask an agent that checks nothing"))

	o.RefuseWithoutACLs = true
	_, err = o.Verify(context.Background(), tok)
	must.ErrorIs(t, err, ErrUnauthenticated)
	must.StrContains(t, err.Error(), "no ACLs")

	// ACLs turned on later: seen within the TTL.
	o.RefuseWithoutACLs = false
	nomad.SetACLs(true)
	clk.Advance(time.Minute)
	_, err = o.Verify(context.Background(), tok)
	must.ErrorIs(t, err, ErrUnauthenticated)
}

type countWriter struct{ n *int }

func (c countWriter) Write(p []byte) (int, error) { *c.n++; return len(p), nil }

// The router checks a named identity (aud = the planner's audience)
// against the JWKS when the agent publishes one, and everything else, or
// everything when there is no JWKS (Nomad 1.6 answers 404), online.
func TestRouter(t *testing.T) {
	now := time.Now()
	clk := clock.NewFake(now)
	f := newFakeJWKS(t)
	o, nomad := newOnline(t, clk)
	named := f.sign(t, "EdDSA", "ed-1", workload("train-a", now))
	dflt := unsignedToken(v16Claims("default", "train-a", "alloc-1", now), "default-identity")
	nomad.AddIdentity(dflt, "default", "train-a")

	for _, tc := range []struct {
		name        string
		offered     bool
		token       string
		ok          bool
		jwksFetches int32
	}{
		{"named identity, JWKS offered", true, named, true, 2},
		{"default identity, JWKS offered", true, dflt, true, 0},
		{"named identity, no JWKS: Nomad must vouch", false, named, false, 0},
		{"default identity, no JWKS", false, dflt, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !tc.offered {
					http.NotFound(w, r)
					return
				}
				f.Config.Handler.ServeHTTP(w, r)
			}))
			defer jwks.Close()
			f.fetches.Store(0)
			ks := NewKeySet(jwks.URL, nil, clk)
			r := &Router{
				JWKS:   &Verifier{Keys: ks, Clock: clk, Audience: "caravan-planner"},
				Online: o, JWKSURL: jwks.URL, Clock: clk, ProbeEvery: time.Minute, Logger: hclog.NewNullLogger(),
			}
			id, err := r.Verify(context.Background(), tc.token)
			if tc.ok {
				must.NoError(t, err)
				must.Eq(t, "train-a", id.JobID)
			} else {
				must.ErrorIs(t, err, ErrUnauthenticated)
			}
			// a named identity: the probe, then the key set's fetch
			must.Eq(t, tc.jwksFetches, f.fetches.Load())
		})
	}
}

// The handler with the router on an agent without a JWKS (Nomad 1.6):
// Nomad's answer decides, and Nomad being down is a 503, not a refusal.
func TestHandler_OnlineCheck(t *testing.T) {
	now := time.Now()
	clk := clock.NewFake(now)
	o, nomad := newOnline(t, clk)
	noJWKS := httptest.NewServer(http.NotFoundHandler())
	defer noJWKS.Close()
	r := &Router{
		JWKS:   &Verifier{Keys: NewKeySet(noJWKS.URL, nil, clk), Clock: clk, Audience: "caravan-planner"},
		Online: o, JWKSURL: noJWKS.URL, Clock: clk, ProbeEvery: time.Minute, Logger: hclog.NewNullLogger(),
	}
	h := &Handler{Verifier: r, Store: NewStore(10), Clock: clk, Logger: hclog.NewNullLogger()}
	srv := httptest.NewServer(h)
	defer srv.Close()
	good := unsignedToken(v16Claims("default", "train-a", "alloc-a", now), "good")
	nomad.AddIdentity(good, "default", "train-a")
	post := func(token string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+Path, strings.NewReader(`{"step": 1, "loss": 0.5, "samples_per_sec": 1}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		must.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	must.Eq(t, http.StatusNoContent, post(good))
	must.Eq(t, http.StatusUnauthorized, post(unsignedToken(v16Claims("default", "train-a", "alloc-a", now), "forged")))
	nomad.SetDown(true)
	must.Eq(t, http.StatusServiceUnavailable, post(unsignedToken(v16Claims("default", "train-a", "alloc-a", now), "new")))
	must.Eq(t, http.StatusNoContent, post(good), must.Sprint("answered from the cache while Nomad is down"))
}
