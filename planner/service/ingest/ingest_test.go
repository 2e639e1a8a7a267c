package ingest

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/planner/service/clock"
	"github.com/caravan-nomad/caravan/progress"
)

var b64 = base64.RawURLEncoding

// fakeJWKS serves a key set like Nomad's /.well-known/jwks.json and signs
// tokens with its keys.
type fakeJWKS struct {
	*httptest.Server
	rsaKey  *rsa.PrivateKey
	edKey   ed25519.PrivateKey
	fetches atomic.Int32
	// rsaRemoved drops the RSA key from the set, as `nomad operator root
	// keyring remove` does.
	rsaRemoved atomic.Bool
}

func newFakeJWKS(t *testing.T) *fakeJWKS {
	t.Helper()
	f := &fakeJWKS{}
	var err error
	f.rsaKey, err = rsa.GenerateKey(rand.Reader, 2048)
	must.NoError(t, err)
	_, f.edKey, err = ed25519.GenerateKey(rand.Reader)
	must.NoError(t, err)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.fetches.Add(1)
		pub := f.edKey.Public().(ed25519.PublicKey)
		keys := []map[string]string{
			{"kty": "OKP", "crv": "Ed25519", "kid": "ed-1", "alg": "EdDSA", "use": "sig", "x": b64.EncodeToString(pub)},
		}
		if !f.rsaRemoved.Load() {
			keys = append(keys, map[string]string{"kty": "RSA", "kid": "rsa-1", "alg": "RS256", "use": "sig",
				"n": b64.EncodeToString(f.rsaKey.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(f.rsaKey.E)).Bytes())})
		}
		set := map[string]any{"keys": keys}
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeJWKS) sign(t *testing.T, alg, kid string, claims map[string]any) string {
	t.Helper()
	return f.signHeader(t, map[string]any{"alg": alg, "kid": kid, "typ": "JWT"}, claims)
}

// signHeader signs claims under the given protected header (its alg picks
// the key).
func (f *fakeJWKS) signHeader(t *testing.T, header, claims map[string]any) string {
	t.Helper()
	alg, _ := header["alg"].(string)
	hdr, _ := json.Marshal(header)
	body, _ := json.Marshal(claims)
	signing := b64.EncodeToString(hdr) + "." + b64.EncodeToString(body)
	var sig []byte
	switch alg {
	case "RS256":
		sum := sha256.Sum256([]byte(signing))
		var err error
		sig, err = rsa.SignPKCS1v15(rand.Reader, f.rsaKey, crypto.SHA256, sum[:])
		must.NoError(t, err)
	case "EdDSA":
		sig = ed25519.Sign(f.edKey, []byte(signing))
	}
	return signing + "." + b64.EncodeToString(sig)
}

func workload(job string, now time.Time) map[string]any {
	return map[string]any{
		"nomad_namespace": "default", "nomad_job_id": job, "nomad_allocation_id": "alloc-1", "nomad_task": "train",
		"aud": []string{"caravan-planner"}, "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
}

func newVerifier(f *fakeJWKS, clk clock.Clock) *Verifier {
	return &Verifier{Keys: NewKeySet(f.URL, nil, clk), Clock: clk, Audience: "caravan-planner"}
}

func TestVerifier(t *testing.T) {
	f := newFakeJWKS(t)
	now := time.Now()
	clk := clock.NewFake(now)
	v := newVerifier(f, clk)
	with := func(mut func(map[string]any)) map[string]any {
		c := workload("train-a", now)
		mut(c)
		return c
	}
	cases := []struct {
		name  string
		token func() string
		err   string
	}{
		{"rs256", func() string { return f.sign(t, "RS256", "rsa-1", workload("train-a", now)) }, ""},
		{"eddsa", func() string { return f.sign(t, "EdDSA", "ed-1", workload("train-a", now)) }, ""},
		{"aud as string", func() string {
			return f.sign(t, "RS256", "rsa-1", with(func(c map[string]any) { c["aud"] = "caravan-planner" }))
		}, ""},
		{"wrong audience", func() string {
			return f.sign(t, "RS256", "rsa-1", with(func(c map[string]any) { c["aud"] = []string{"nomadproject.io"} }))
		}, "audience"},
		{"expired", func() string {
			return f.sign(t, "RS256", "rsa-1", with(func(c map[string]any) { c["exp"] = now.Add(-time.Hour).Unix() }))
		}, "expired"},
		{"no exp", func() string {
			return f.sign(t, "RS256", "rsa-1", with(func(c map[string]any) { delete(c, "exp") }))
		}, "no exp claim"},
		{"not yet valid", func() string {
			return f.sign(t, "RS256", "rsa-1", with(func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() }))
		}, "not valid before"},
		{"no job claim", func() string {
			return f.sign(t, "RS256", "rsa-1", with(func(c map[string]any) { delete(c, "nomad_job_id") }))
		}, "not a workload identity"},
		{"unknown key", func() string { return f.sign(t, "RS256", "rsa-2", workload("train-a", now)) }, "unknown signing key"},
		{"alg confusion", func() string { return f.sign(t, "EdDSA", "rsa-1", workload("train-a", now)) }, "does not match"},
		{"tampered payload", func() string {
			tok := f.sign(t, "RS256", "rsa-1", workload("train-a", now))
			parts := strings.Split(tok, ".")
			other, _ := json.Marshal(workload("train-b", now))
			return parts[0] + "." + b64.EncodeToString(other) + "." + parts[2]
		}, "bad token signature"},
		{"garbage", func() string { return "not-a-jwt" }, "compact JWS"},
		{"alg none", func() string {
			hdr, _ := json.Marshal(map[string]string{"alg": "none", "kid": "rsa-1"})
			body, _ := json.Marshal(workload("train-a", now))
			return b64.EncodeToString(hdr) + "." + b64.EncodeToString(body) + "."
		}, "unexpected signature algorithm"},
		// The algorithm-confusion attack: a token HMAC-signed with the
		// RSA public key, as a verifier that took the header's alg and
		// the published key as an HMAC secret would accept it. Keyed
		// with the key in each form an attacker could fetch.
		{"hs256 keyed with the public key (PEM)", func() string {
			return f.hmacWithPublicKey(t, "pem", workload("train-a", now))
		}, "unexpected signature algorithm"},
		{"hs256 keyed with the public key (DER)", func() string {
			return f.hmacWithPublicKey(t, "der", workload("train-a", now))
		}, "unexpected signature algorithm"},
		{"hs256 keyed with the public key (JWK n)", func() string {
			return f.hmacWithPublicKey(t, "n", workload("train-a", now))
		}, "unexpected signature algorithm"},
		// RFC 7515 section 4.1.11: a crit extension the verifier does not
		// implement makes the token invalid, however well signed.
		{"unknown crit", func() string {
			return f.signHeader(t, map[string]any{"alg": "RS256", "kid": "rsa-1", "crit": []string{"x-caravan"}, "x-caravan": 1},
				workload("train-a", now))
		}, "crit"},
		{"unknown crit eddsa", func() string {
			return f.signHeader(t, map[string]any{"alg": "EdDSA", "kid": "ed-1", "crit": []string{"exp"}, "exp": 1},
				workload("train-a", now))
		}, "crit"},
		{"crit not a list", func() string {
			return f.signHeader(t, map[string]any{"alg": "RS256", "kid": "rsa-1", "crit": "x-caravan"}, workload("train-a", now))
		}, "unauthenticated"},
	}
	for _, tc := range cases {
		// An unknown key ID waits for the next fetch's slot: each case
		// comes at least MinRefresh after the last fetch.
		clk.Advance(DefaultMinRefresh)
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.Verify(context.Background(), tc.token())
			if tc.err == "" {
				must.NoError(t, err)
				must.Eq(t, Identity{Namespace: "default", JobID: "train-a", AllocationID: "alloc-1", Task: "train"}, id)
				return
			}
			must.ErrorIs(t, err, ErrUnauthenticated)
			must.StrContains(t, err.Error(), tc.err)
		})
	}
}

// Unknown key IDs cause at most one fetch per MinRefresh however many
// arrive, and the callers waiting share it; nothing is remembered as
// unknown (a refused ID asks again at the next fetch).
func TestKeySet_UnknownKeyRefreshIsRateLimited(t *testing.T) {
	f := newFakeJWKS(t)
	clk := clock.NewFake(time.Now())
	ks := NewKeySet(f.URL, nil, clk)
	_, err := ks.Key(context.Background(), "rsa-1")
	must.NoError(t, err)
	for round := int32(2); round <= 3; round++ {
		errs := make(chan error, 5)
		for i := 0; i < 5; i++ {
			go func() {
				_, err := ks.Key(context.Background(), fmt.Sprintf("forged-%d", i))
				errs <- err
			}()
		}
		clk.BlockUntil(5) // all five wait for the next fetch's slot
		must.Eq(t, round-1, f.fetches.Load())
		clk.Advance(ks.MinRefresh)
		for i := 0; i < 5; i++ {
			must.ErrorIs(t, <-errs, ErrUnknownKey)
		}
		must.Eq(t, round, f.fetches.Load())
	}
}

// A key Nomad has just rotated in is accepted by the next fetch, at most
// MinRefresh after the last: before, an ID found unknown was remembered
// as unknown for 30 s, so a rotated key's tokens got 401 for about 40 s
// (issue 29). Here the new key's first token arrives a moment before
// Nomad's JWKS lists it (refused: the set read after it lacks the key);
// the next one, a second after the key is listed, waits for the next
// fetch's slot and verifies.
func TestKeySet_RotatedKeyIsAcceptedAtOnce(t *testing.T) {
	f := newFakeJWKS(t)
	f.rsaRemoved.Store(true) // "rsa-1" is the key about to be rotated in
	now := time.Now()
	clk := clock.NewFake(now)
	v := newVerifier(f, clk)
	_, err := v.Verify(context.Background(), f.sign(t, "EdDSA", "ed-1", workload("train-a", now)))
	must.NoError(t, err)

	clk.Advance(5 * time.Second)
	tok := f.sign(t, "RS256", "rsa-1", workload("train-a", now))
	_, err = v.Verify(context.Background(), tok)
	must.ErrorIs(t, err, ErrUnauthenticated)
	must.StrContains(t, err.Error(), "unknown signing key")
	must.Eq(t, int32(2), f.fetches.Load())

	f.rsaRemoved.Store(false) // Nomad's JWKS lists the new key
	clk.Advance(time.Second)
	res := make(chan error, 1)
	go func() { _, err := v.Verify(context.Background(), tok); res <- err }()
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool { return clk.Waiters() > 0 || len(res) > 0 }),
		wait.Timeout(5*time.Second), wait.Gap(time.Millisecond)))
	if len(res) > 0 {
		must.NoError(t, <-res, must.Sprint("a token of the key rotated in was refused without a fetch"))
	}
	clk.Advance(ks(v).MinRefresh - time.Second)
	must.NoError(t, <-res)
	must.Eq(t, int32(3), f.fetches.Load())
}

func ks(v *Verifier) *KeySet { return v.Keys }

// gatedJWKS serves the fake's key set only when let through, and fails
// while failing is set, counting fetches.
type gatedJWKS struct {
	*httptest.Server
	gate    chan struct{}
	failing atomic.Bool
	fetches atomic.Int32
}

func newGatedJWKS(t *testing.T, f *fakeJWKS) *gatedJWKS {
	g := &gatedJWKS{gate: make(chan struct{})}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.fetches.Add(1)
		<-g.gate
		if g.failing.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		resp, err := http.Get(f.URL)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(func() { g.open(); g.Close() })
	return g
}

func (g *gatedJWKS) open() {
	select {
	case <-g.gate:
	default:
		close(g.gate)
	}
}

// A forged key ID makes the planner fetch the JWKS; while that fetch hangs,
// a token with a known key is verified at once, and concurrent forged IDs
// share the one fetch.
func TestKeySet_ForgedKidsNeverBlockKnownKeys(t *testing.T) {
	f := newFakeJWKS(t)
	clk := clock.NewFake(time.Now())
	g := newGatedJWKS(t, f)
	ks := NewKeySet(g.URL, nil, clk)
	g.open()
	_, err := ks.Key(context.Background(), "rsa-1")
	must.NoError(t, err)
	g.gate = make(chan struct{}) // the next fetch hangs
	clk.Advance(time.Minute)

	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			_, err := ks.Key(context.Background(), fmt.Sprintf("forged-%d", i))
			errs <- err
		}()
	}
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool { return g.fetches.Load() == 2 && waiting(ks) == 8 }),
		wait.Timeout(5*time.Second), wait.Gap(time.Millisecond)))
	known := make(chan error, 1)
	go func() { _, err := ks.Key(context.Background(), "ed-1"); known <- err }()
	select {
	case err := <-known:
		must.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("a known key waited for the forged IDs' JWKS fetch")
	}
	g.open()
	// The first forged ID's own fetch answers it; the seven that arrived
	// while it ran need a fetch that started after them: one more, shared.
	must.ErrorIs(t, <-errs, ErrUnknownKey)
	clk.BlockUntil(7)
	clk.Advance(ks.MinRefresh)
	for i := 0; i < 7; i++ {
		must.ErrorIs(t, <-errs, ErrUnknownKey)
	}
	must.Eq(t, int32(3), g.fetches.Load())
}

// waiting is how many callers wait for a fetch.
func waiting(ks *KeySet) int {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.waiting
}

// A failing JWKS endpoint is asked at most once per MinRefresh: the failure
// is answered from the cache (503 to the caller, not 401).
func TestKeySet_FailuresAreCached(t *testing.T) {
	f := newFakeJWKS(t)
	clk := clock.NewFake(time.Now())
	g := newGatedJWKS(t, f)
	g.failing.Store(true)
	g.open()
	ks := NewKeySet(g.URL, nil, clk)
	for i := 0; i < 5; i++ {
		_, err := ks.Key(context.Background(), fmt.Sprintf("k-%d", i))
		must.Error(t, err)
		must.False(t, errors.Is(err, ErrUnknownKey))
		must.StrContains(t, err.Error(), "HTTP 502")
	}
	must.Eq(t, int32(1), g.fetches.Load())
	g.failing.Store(false)
	clk.Advance(ks.MinRefresh)
	_, err := ks.Key(context.Background(), "rsa-1")
	must.NoError(t, err)
	must.Eq(t, int32(2), g.fetches.Load())
}

// A caller that gives up stops waiting; the fetch goes on for the others.
func TestKeySet_CallerContextEndsItsWaitOnly(t *testing.T) {
	f := newFakeJWKS(t)
	g := newGatedJWKS(t, f)
	ks := NewKeySet(g.URL, nil, clock.NewFake(time.Now()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ks.Key(ctx, "rsa-1")
	must.ErrorIs(t, err, context.Canceled)
	g.open()
	_, err = ks.Key(context.Background(), "rsa-1")
	must.NoError(t, err)
	must.Eq(t, int32(1), g.fetches.Load())
}

func TestHandler(t *testing.T) {
	f := newFakeJWKS(t)
	now := time.Now()
	clk := clock.NewFake(now)
	store := NewStore(100)
	h := &Handler{
		Verifier: newVerifier(f, clk), Store: store, Clock: clk, Logger: hclog.NewNullLogger(),
		Authorize: func(id Identity) error {
			if id.JobID != "train-a" {
				return errors.New("job " + id.JobID + " is not managed: " + ErrForbidden.Error())
			}
			return nil
		},
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	good := f.sign(t, "RS256", "rsa-1", workload("train-a", now))
	unmanaged := f.sign(t, "RS256", "rsa-1", workload("other", now))
	post := func(token, ctype, body string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+Path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		must.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	ok := `{"step": 100, "loss": 0.5, "samples_per_sec": 320}`
	cases := []struct {
		name, token, ctype, body string
		code                     int
	}{
		{"accepted", good, "application/json", ok, 204},
		{"no token", "", "application/json", ok, 401},
		{"bad token", "abc.def.ghi", "application/json", ok, 401},
		{"other job", unmanaged, "application/json", ok, 403},
		{"bad json", good, "application/json", `{"step": "ten"}`, 400},
		{"job field ignored", good, "application/json", `{"step": 200, "loss": 0.4, "samples_per_sec": 1, "job": "other"}`, 204},
		{"negative loss", good, "application/json", `{"step": 1, "loss": -1, "samples_per_sec": 1}`, 400},
		{"wrong content type", good, "text/plain", ok, 415},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.code, post(tc.token, tc.ctype, tc.body))
		})
	}
	recs := store.Records(JobKey{Namespace: "default", ID: "train-a"})
	must.SliceLen(t, 2, recs)
	must.Eq(t, int64(100), recs[0].Step)
	must.Eq(t, "alloc-1", recs[0].AllocationID)
	must.SliceEmpty(t, store.Records(JobKey{Namespace: "default", ID: "other"}))

	resp, err := http.Get(srv.URL + Path)
	must.NoError(t, err)
	resp.Body.Close()
	must.Eq(t, 405, resp.StatusCode)
}

func TestReport(t *testing.T) {
	f := newFakeJWKS(t)
	now := time.Now()
	clk := clock.NewFake(now)
	store := NewStore(100)
	srv := httptest.NewServer(&Handler{Verifier: newVerifier(f, clk), Store: store, Clock: clk, Logger: hclog.NewNullLogger()})
	defer srv.Close()
	tok := f.sign(t, "EdDSA", "ed-1", workload("train-a", now))
	must.NoError(t, progress.Report(context.Background(), nil, srv.URL, tok, Sample{Step: 5, Loss: 2.5, SamplesPerSec: 10}))
	must.NoError(t, progress.Report(context.Background(), nil, srv.URL+Path, tok, Sample{Step: 6, Loss: 2.4, SamplesPerSec: 10}))
	must.SliceLen(t, 2, store.Records(JobKey{Namespace: "default", ID: "train-a"}))
	err := progress.Report(context.Background(), nil, srv.URL, "bad", Sample{Step: 7, Loss: 2.3})
	must.ErrorIs(t, err, progress.ErrRejected)
	err = progress.Report(context.Background(), nil, srv.URL, tok, Sample{Step: -1})
	must.ErrorIs(t, err, progress.ErrBadSample)
}

func TestStoreRate(t *testing.T) {
	s := NewStore(100)
	k := JobKey{Namespace: "default", ID: "a"}
	t0 := time.Unix(1000, 0)
	// Two data-parallel workers share the global step.
	for i := 0; i <= 10; i++ {
		for _, alloc := range []string{"w1", "w2"} {
			s.Add(k, Record{Sample: Sample{Step: int64(i * 50), Loss: 1, SamplesPerSec: 100}, Time: t0.Add(time.Duration(i) * time.Second), AllocationID: alloc})
		}
	}
	steps, samples, reporters, ok := s.Rate(k, t0)
	must.True(t, ok)
	must.Eq(t, 50.0, steps)
	must.Eq(t, 200.0, samples)
	must.Eq(t, 2, reporters)
	_, _, _, ok = s.Rate(k, t0.Add(time.Hour))
	must.False(t, ok)
}

func TestStoreBounded(t *testing.T) {
	s := NewStore(40)
	k := JobKey{Namespace: "default", ID: "a"}
	for i := 0; i < 1000; i++ {
		s.Add(k, Record{Sample: Sample{Step: int64(i)}})
	}
	recs := s.Records(k)
	must.LessEq(t, 40, len(recs))
	must.Eq(t, int64(999), recs[len(recs)-1].Step)
}

// The report that poisoned a live planner (step 2^63-1, loss 1e308) and
// its kin are refused with a 400 naming the field; a sample's every field
// is kept; a step may not leap ahead of the job's previous report.
func TestHandler_PlausibilityBounds(t *testing.T) {
	f := newFakeJWKS(t)
	now := time.Now()
	clk := clock.NewFake(now)
	store := NewStore(100)
	srv := httptest.NewServer(&Handler{Verifier: newVerifier(f, clk), Store: store, Clock: clk, Logger: hclog.NewNullLogger()})
	defer srv.Close()
	tok := f.sign(t, "RS256", "rsa-1", workload("train-a", now))
	post := func(body string) (int, progress.ErrorBody) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+Path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		must.NoError(t, err)
		defer resp.Body.Close()
		var eb progress.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		return resp.StatusCode, eb
	}
	code, _ := post(`{"step": 1000, "loss": 0.5, "samples_per_sec": 10, "workers": 4, "ps": 2, "steps_total": 5000, "grad_sqr": 0.25, "grad_var": 3}`)
	must.Eq(t, 204, code)
	cases := []struct{ name, body, field string }{
		{"the poison", `{"step": 9223372036854775807, "loss": 1e308, "samples_per_sec": 1}`, "step"},
		{"huge loss", `{"step": 1001, "loss": 1e308, "samples_per_sec": 1}`, "loss"},
		{"huge speed", `{"step": 1001, "loss": 1, "samples_per_sec": 1e300}`, "samples_per_sec"},
		{"a leap", `{"step": 100000000000000, "loss": 1, "samples_per_sec": 1}`, "step"},
		{"missing loss", `{"step": 1001, "samples_per_sec": 1}`, "loss"},
		// A loss of 0 (or -0) once got 204 and then failed the job's
		// convergence fit until it aged out: refused here instead.
		{"zero loss", `{"step": 1001, "loss": 0, "samples_per_sec": 1}`, "loss"},
		{"negative zero loss", `{"step": 1001, "loss": -0, "samples_per_sec": 1}`, "loss"},
		{"negative grad_sqr", `{"step": 1001, "loss": 1, "samples_per_sec": 1, "grad_sqr": -1e-9}`, "grad_sqr"},
		{"huge workers", `{"step": 1001, "loss": 1, "samples_per_sec": 1, "workers": 1e400}`, "workers"},
		{"oom not a bool", `{"step": 1001, "loss": 1, "samples_per_sec": 1, "gpu_out_of_memory": "yes"}`, "gpu_out_of_memory"},
		{"oom and done", `{"step": 1001, "loss": 1, "samples_per_sec": 1, "gpu_out_of_memory": true, "done": true}`, "gpu_out_of_memory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, eb := post(tc.body)
			must.Eq(t, 400, code)
			must.Eq(t, tc.field, eb.Field)
			must.StrContains(t, eb.Error, tc.field)
		})
	}
	recs := store.Records(JobKey{Namespace: "default", ID: "train-a"})
	must.SliceLen(t, 1, recs)
	must.Eq(t, Sample{Step: 1000, Loss: 0.5, SamplesPerSec: 10, Workers: 4, PS: 2, StepsTotal: 5000, GradSqr: 0.25, GradVar: 3}, recs[0].Sample)
	// Going back (a restart from an older checkpoint) is fine.
	code, _ = post(`{"step": 10, "loss": 2, "samples_per_sec": 10}`)
	must.Eq(t, 204, code)
	// An out-of-memory report is kept with its flag (the planner grows
	// the job's shares from it).
	code, _ = post(`{"step": 11, "loss": 2, "samples_per_sec": 10, "gpu_out_of_memory": true, "gpu_memory_peak_bytes": 1073741824}`)
	must.Eq(t, 204, code)
	latest, ok := store.Latest(JobKey{Namespace: "default", ID: "train-a"})
	must.True(t, ok)
	must.True(t, latest.GPUOutOfMemory)
	must.Eq(t, int64(1)<<30, latest.GPUMemoryPeakBytes)
}

// hmacWithPublicKey signs claims with HS256 keyed with the fixture's RSA
// public key: its PKIX DER ("der"), that in PEM ("pem"), or the modulus
// bytes the JWKS publishes ("n").
func (f *fakeJWKS) hmacWithPublicKey(t *testing.T, form string, claims map[string]any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&f.rsaKey.PublicKey)
	must.NoError(t, err)
	key := map[string][]byte{
		"der": der,
		"pem": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
		"n":   f.rsaKey.N.Bytes(),
	}[form]
	must.SliceNotEmpty(t, key)
	hdr, _ := json.Marshal(map[string]string{"alg": "HS256", "kid": "rsa-1", "typ": "JWT"})
	body, _ := json.Marshal(claims)
	input := b64.EncodeToString(hdr) + "." + b64.EncodeToString(body)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(input))
	return input + "." + b64.EncodeToString(mac.Sum(nil))
}
