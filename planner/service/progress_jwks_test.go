package service

// Integration tests of the planner's progress endpoint against a JWKS: a
// whole planner (NewAgent: its HTTP server, router, verifier, key set,
// authorizer and store) on a fake Nomad, with a fake JWKS endpoint whose
// keys and fetches the test controls, and a fake clock for the key set's
// refresh and expiry. They back SECURITY.md's JWKS rows on every Nomad,
// Nomad 1.6 included (it publishes no JWKS, so the e2e variants skip
// there).

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/planner/service/clock"
	"github.com/caravan-nomad/caravan/planner/service/config"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
)

var b64 = base64.RawURLEncoding

// jwksEndpoint is a fake of Nomad's /.well-known/jwks.json: it serves the
// public halves of its keys, counts the requests that start and end, and
// can hold every request until released.
type jwksEndpoint struct {
	*httptest.Server
	mu     sync.Mutex
	keys   map[string]*rsa.PrivateKey
	served map[string]bool // kid -> listed in the set
	hold   chan struct{}   // non-nil: requests wait until it is closed
	held   chan struct{}   // closed when a request first waits on hold

	started, ended atomic.Int64
}

func newJWKSEndpoint(t *testing.T, kids ...string) *jwksEndpoint {
	t.Helper()
	e := &jwksEndpoint{keys: map[string]*rsa.PrivateKey{}, served: map[string]bool{}}
	for _, kid := range kids {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		must.NoError(t, err)
		e.keys[kid], e.served[kid] = k, true
	}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(func() { e.release(); e.Close() })
	return e
}

func (e *jwksEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	e.started.Add(1)
	defer e.ended.Add(1)
	e.mu.Lock()
	hold, held := e.hold, e.held
	e.mu.Unlock()
	if hold != nil {
		select {
		case <-held:
		default:
			close(held)
		}
		select {
		case <-hold:
		case <-r.Context().Done(): // the planner gave up on the fetch
			return
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var keys []map[string]string
	for kid, k := range e.keys {
		if e.served[kid] {
			keys = append(keys, map[string]string{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
				"n": b64.EncodeToString(k.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(k.E)).Bytes())})
		}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"keys": keys})
}

// holdFetches makes every request wait until release; the returned channel
// is closed when the first one arrives.
func (e *jwksEndpoint) holdFetches() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hold, e.held = make(chan struct{}), make(chan struct{})
	return e.held
}

func (e *jwksEndpoint) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hold != nil {
		close(e.hold)
		e.hold = nil
	}
}

// remove drops kid from the set, as `nomad operator root keyring remove`.
func (e *jwksEndpoint) remove(kid string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.served[kid] = false
}

// token is a workload identity of the planner's audience for allocation
// alloc-a of job default/a, signed RS256 with kid's key; exp is left out
// when zero.
func (e *jwksEndpoint) token(t *testing.T, kid string, now time.Time, exp time.Duration) string {
	t.Helper()
	claims := map[string]any{
		"nomad_namespace": "default", "nomad_job_id": "a", "nomad_allocation_id": "alloc-a", "nomad_task": "train",
		"aud": []string{"caravan-planner"}, "iat": now.Unix(), "nbf": now.Unix(),
	}
	if exp != 0 {
		claims["exp"] = now.Add(exp).Unix()
	}
	hdr, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid})
	body, _ := json.Marshal(claims)
	signing := b64.EncodeToString(hdr) + "." + b64.EncodeToString(body)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, e.keys[kid], crypto.SHA256, sum[:])
	must.NoError(t, err)
	return signing + "." + b64.EncodeToString(sig)
}

// forged is token with a random key ID the set does not hold (and so a
// signature no key checks).
func forged(token string) string {
	kid := make([]byte, 12)
	_, _ = rand.Read(kid)
	hdr, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": b64.EncodeToString(kid)})
	parts := strings.Split(token, ".")
	return b64.EncodeToString(hdr) + "." + parts[1] + "." + parts[2]
}

// slotClock is a fake clock that counts the timers of at most
// ingest.DefaultMinRefresh still pending: once the planner has run a round,
// only the key set sets such short ones (a caller waiting for the next
// fetch's slot).
type slotClock struct {
	*clock.Fake
	short atomic.Int64
}

func (c *slotClock) After(d time.Duration) <-chan time.Time {
	ch := c.Fake.After(d)
	if d <= 0 || d > ingest.DefaultMinRefresh {
		return ch
	}
	c.short.Add(1)
	out := make(chan time.Time, 1)
	go func() {
		t := <-ch // fired by an Advance (the test advances until none is left)
		c.short.Add(-1)
		out <- t
	}()
	return out
}

// jwksPlanner is a running planner on a fake Nomad that manages job
// default/a (allocation alloc-a running), checking its tokens against a
// fake JWKS on a fake clock.
type jwksPlanner struct {
	url  string
	jwks *jwksEndpoint
	clk  *slotClock
	hc   *http.Client
	step atomic.Int64
}

func startJWKSPlanner(t *testing.T, jwks *jwksEndpoint) *jwksPlanner {
	t.Helper()
	nomad := fakenomad.New()
	t.Cleanup(nomad.Close)
	nomad.SetNodes([]*nomadapi.NodeListStub{{ID: "n1", Name: "client1", Status: "ready", SchedulingEligibility: "eligible"}})
	nomad.PutJob(fakenomad.TrainingJob("a", 1, nil))
	nomad.SetAllocs([]*nomadapi.AllocationListStub{{ID: "alloc-a", Namespace: "default", JobID: "a", TaskGroup: "worker",
		NodeID: "n1", ClientStatus: "running", DesiredStatus: "run"}})

	cfg := config.Default()
	cfg.Port = 0
	cfg.Nomad.Address = nomad.URL
	cfg.Nomad.BlockingWait = 200 * time.Millisecond
	cfg.Consul.Enabled = false
	cfg.UI.Enabled = false
	cfg.Policy.Interval = time.Hour
	cfg.DryRun = true
	cfg.Progress.JWKSURL = jwks.URL
	must.NoError(t, cfg.Validate())
	must.Eq(t, config.MaxJWKSMaxAge, cfg.Progress.JWKSMaxAge) // the shipped bound

	clk := &slotClock{Fake: clock.NewFake(time.Now())}
	a, err := NewAgent(cfg, hclog.NewNullLogger(), clk)
	must.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); must.NoError(t, <-done) })
	return &jwksPlanner{url: "http://" + a.Addr() + "/v1/progress", jwks: jwks, clk: clk,
		hc: &http.Client{Timeout: time.Minute}}
}

// post sends one progress report (a fresh step each time) with token.
func (p *jwksPlanner) post(token string) (int, string, error) {
	body := fmt.Sprintf(`{"step": %d, "loss": 1, "samples_per_sec": 1}`, p.step.Add(1))
	req, err := http.NewRequest(http.MethodPost, p.url, bytes.NewBufferString(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var eb struct {
		Error string `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	return resp.StatusCode, eb.Error, nil
}

// accepted waits until token's report is accepted (the planner has read
// Nomad and the JWKS), then returns.
func (p *jwksPlanner) accepted(t *testing.T, token string) {
	t.Helper()
	var last string
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		code, msg, err := p.post(token)
		last = fmt.Sprintf("HTTP %d %s %v", code, msg, err)
		return err == nil && code == http.StatusNoContent
	}), wait.Timeout(30*time.Second), wait.Gap(20*time.Millisecond)),
		must.Func(func() string { return "a valid report was never accepted: " + last }))
}

// settle advances the clock until the manager has decided a round (from
// then on it sets no short timer: only the key set does) and no short
// timer is pending; the next JWKS fetch may then run at once.
func (p *jwksPlanner) settle(t *testing.T) {
	t.Helper()
	p.clk.Advance(ingest.DefaultMinRefresh)
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		if p.clk.short.Load() > 0 {
			p.clk.Advance(ingest.DefaultMinRefresh)
			return false
		}
		var round struct {
			Skipped string `json:"skipped"`
		}
		resp, err := p.hc.Get(strings.TrimSuffix(p.url, "/progress") + "/plan")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&round) == nil && round.Skipped == ""
	}), wait.Timeout(time.Minute), wait.Gap(5*time.Millisecond)), must.Sprint("the planner decided no round"))
}

// Tokens with forged key IDs flood the progress endpoint while the JWKS
// fetch they cause is held. Expected: a report with a known key's token is
// accepted while that fetch is still held (it does not queue behind it);
// every forgery gets 401; and the forgeries cause one fetch per
// MinRefresh of the clock however many arrive (here: the held one, then
// one per advance of the fake clock by MinRefresh).
func TestAgent_ForgedKeyIDFloodDoesNotStallReports(t *testing.T) {
	jwks := newJWKSEndpoint(t, "k1")
	p := startJWKSPlanner(t, jwks)
	good := jwks.token(t, "k1", p.clk.Now(), time.Hour)
	p.accepted(t, good)
	p.settle(t)
	before := jwks.started.Load() // the probe and the first fetch
	must.Eq(t, before, jwks.ended.Load())

	const clients = 16
	held := jwks.holdFetches()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent, inFlight, answered atomic.Int64
	var oddMu sync.Mutex
	var odd []string // answers other than 401 naming the unknown key
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent.Add(1)
				inFlight.Add(1)
				code, msg, err := p.post(forged(good))
				inFlight.Add(-1)
				answered.Add(1)
				if err != nil || code != http.StatusUnauthorized || !strings.Contains(msg, "unknown signing key") {
					oddMu.Lock()
					odd = append(odd, fmt.Sprintf("HTTP %d %q %v", code, msg, err))
					oddMu.Unlock()
				}
			}
		}()
	}
	stopFlood := sync.OnceFunc(func() { close(stop) })
	defer func() { stopFlood(); jwks.release(); wg.Wait() }() // on a failure too

	// The flood is in: the fetch it caused is held, and every client has a
	// forgery waiting for it.
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("the forged key IDs caused no JWKS fetch")
	}
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool { return inFlight.Load() == clients }),
		wait.Timeout(time.Minute), wait.Gap(time.Millisecond)),
		must.Func(func() string { return fmt.Sprintf("%d forgeries in flight, want %d", inFlight.Load(), clients) }))

	code, msg, err := p.post(good)
	must.NoError(t, err)
	must.Eq(t, http.StatusNoContent, code, must.Sprint(msg))
	must.Eq(t, before, jwks.ended.Load(), must.Sprint("the valid report returned only after the held JWKS fetch ended"))
	must.Eq(t, before+1, jwks.started.Load(), must.Sprint("the flood caused more than one fetch while one was held"))
	must.Eq(t, int64(0), answered.Load(), must.Sprint("a forgery was answered before a JWKS fetch after it"))
	must.Eq(t, int64(clients), sent.Load())

	// Release the fetch. Then, each time every client has a forgery
	// waiting for the next fetch's slot, advance the clock by MinRefresh:
	// exactly one more fetch runs, and it answers them all.
	jwks.release()
	const advances = 4
	for i := 1; i <= advances; i++ {
		want := before + int64(i)
		must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
			return jwks.started.Load() > want || (jwks.ended.Load() == want && p.clk.short.Load() == clients)
		}), wait.Timeout(time.Minute), wait.Gap(time.Millisecond)),
			must.Func(func() string {
				return fmt.Sprintf("advance %d: fetches ended %d (want %d), forgeries waiting for a slot %d (want %d)",
					i, jwks.ended.Load(), want, p.clk.short.Load(), clients)
			}))
		must.Eq(t, want, jwks.started.Load(), must.Sprintf("advance %d: a fetch ran before its slot", i))
		p.clk.Advance(ingest.DefaultMinRefresh)
	}
	// Stop: the forgeries still waiting get their answer from the next
	// fetches, one per advance (the clock is advanced while no fetch runs).
	stopFlood()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	extra := int64(0)
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		select {
		case <-done:
			return true
		default:
		}
		if jwks.started.Load() == jwks.ended.Load() && p.clk.short.Load() > 0 {
			p.clk.Advance(ingest.DefaultMinRefresh)
			extra++
		}
		return false
	}), wait.Timeout(time.Minute), wait.Gap(5*time.Millisecond)))
	fetches := jwks.started.Load() - before
	t.Logf("%d forged-key reports, %d JWKS fetches (%d + %d advances of MinRefresh)", sent.Load(), fetches, advances, extra)
	must.SliceEmpty(t, odd, must.Sprint("forgeries not refused with 401 naming the unknown key"))
	must.Eq(t, sent.Load(), answered.Load())
	must.LessEq(t, 1+advances+extra, fetches)               // never more than one per MinRefresh
	must.GreaterEq(t, int64(advances)*clients, sent.Load()) // each advance's fetch answered every client
}

// A key removed from Nomad's JWKS (`nomad operator root keyring remove`)
// stops verifying reports within progress.jwks_max_age (5 minutes) of the
// fetch that last listed it; the other key still verifies.
func TestAgent_RemovedSigningKeyIsRefused(t *testing.T) {
	jwks := newJWKSEndpoint(t, "old", "new")
	p := startJWKSPlanner(t, jwks)
	maxAge := config.MaxJWKSMaxAge
	oldToken := jwks.token(t, "old", p.clk.Now(), time.Hour)
	newToken := jwks.token(t, "new", p.clk.Now(), time.Hour)
	p.accepted(t, oldToken)
	fetched := jwks.ended.Load()
	jwks.remove("old")

	// Within half the max age the cached set is used as it is.
	p.clk.Advance(maxAge/2 - time.Second)
	code, msg, err := p.post(oldToken)
	must.NoError(t, err)
	must.Eq(t, http.StatusNoContent, code, must.Sprint(msg))
	must.Eq(t, fetched, jwks.started.Load())

	// At the max age the set has expired: the removed key's token is refused.
	p.clk.Advance(maxAge/2 + time.Second)
	code, msg, err = p.post(oldToken)
	must.NoError(t, err)
	must.Eq(t, http.StatusUnauthorized, code, must.Sprint(msg))
	must.StrContains(t, msg, "unknown signing key")
	code, msg, err = p.post(newToken)
	must.NoError(t, err)
	must.Eq(t, http.StatusNoContent, code, must.Sprint(msg))

}

// A token without exp (a planner identity without a ttl: a credential
// that never expires) is refused with 401 naming exp, though its key is
// known and its job managed; the same identity with exp is accepted, and
// an expired one refused.
func TestAgent_TokenWithoutExpIsRefused(t *testing.T) {
	jwks := newJWKSEndpoint(t, "k1")
	p := startJWKSPlanner(t, jwks)
	now := p.clk.Now()
	p.accepted(t, jwks.token(t, "k1", now, time.Hour))

	code, msg, err := p.post(jwks.token(t, "k1", now, 0))
	must.NoError(t, err)
	must.Eq(t, http.StatusUnauthorized, code, must.Sprint(msg))
	must.StrContains(t, msg, "no exp claim")

	code, msg, err = p.post(jwks.token(t, "k1", now, -time.Hour))
	must.NoError(t, err)
	must.Eq(t, http.StatusUnauthorized, code, must.Sprint(msg))
	must.StrContains(t, msg, "expired")
}
