package ingest

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/caravan-nomad/caravan/planner/service/clock"
)

// jwk is the subset of a JSON Web Key that Nomad publishes.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
}

// publicKey is one parsed key of the set.
type publicKey struct {
	alg string // RS256 or EdDSA
	key crypto.PublicKey
}

// ErrUnknownKey is returned when a token names a key the set does not hold,
// even after a refresh.
var ErrUnknownKey = errors.New("unknown signing key")

// KeySet fetches Nomad's JWKS (/.well-known/jwks.json) and caches it. Every
// task can send the planner a token naming any key ID, so an unknown ID must
// cost little: a token with a known key never waits for a fetch; fetches run
// outside the lock, one at a time, at most once per MinRefresh whether they
// succeed or fail, and every caller waiting shares the next one.
//
// An unknown key ID (a key Nomad has just rotated in, or a forged one)
// waits for a fetch that starts after it arrived, at most MinRefresh plus
// the fetch: a token of a freshly rotated key is accepted by the next
// fetch, never refused from a cache of unknown IDs. It is refused only if
// a set read after it arrived lacks the key. While fetches fail, the last
// failure is answered at once (a 503 to the reporter) until the next fetch
// may run. The first failed fetch, in the background or not, is logged,
// and so is the first success after failures.
//
// Keys expire: the set is trusted for at most MaxAge after the fetch that
// returned it, so a key Nomad has removed from its JWKS (`nomad operator
// root keyring remove`) stops verifying tokens within MaxAge (plus one
// fetch). Past half of MaxAge a token with a known key starts a refresh in
// the background and is answered from the cache; past MaxAge it waits for
// the refresh, and a set that cannot be refreshed verifies nothing (the
// fetch error is returned, a 503 to the reporter).
type KeySet struct {
	URL        string
	HTTP       *http.Client
	Clock      clock.Clock
	MinRefresh time.Duration
	// MaxAge bounds how long a fetched key set is trusted (DefaultMaxAge;
	// 0 or less: the default).
	MaxAge time.Duration
	// FetchTimeout bounds one fetch (it does not end when the caller that
	// started it gives up: others may be waiting for it).
	FetchTimeout time.Duration
	// Logger gets the first failed fetch and the recovery (nil: none).
	Logger hclog.Logger

	mu        sync.Mutex
	keys      map[string]publicKey
	fetched   time.Time // start of the fetch that returned keys
	attempted time.Time // last fetch start; zero before the first
	lastErr   error     // the last fetch's error, nil after a success
	inflight  *fetchCall
	started   uint64 // fetches started; each fetch's seq is the count at its start
	done      uint64 // seq of the last fetch that ended
	waiting   int    // callers waiting for a fetch (tests read it)
	failures  int    // fetches failed in a row
	failSince time.Time
}

type fetchCall struct {
	done chan struct{}
	err  error
}

// DefaultMaxAge is the longest a fetched key set is trusted: a key removed
// from Nomad's JWKS is refused within about this long.
const DefaultMaxAge = 5 * time.Minute

// DefaultMinRefresh is the least time between two fetches of the JWKS:
// the longest a token of a key rotated in waits (plus one fetch), and what
// bounds the fetches forged key IDs cause.
const DefaultMinRefresh = 2 * time.Second

// NewKeySet returns a KeySet for url.
func NewKeySet(url string, hc *http.Client, clk clock.Clock) *KeySet {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	if clk == nil {
		clk = clock.Real{}
	}
	return &KeySet{URL: url, HTTP: hc, Clock: clk, MinRefresh: DefaultMinRefresh,
		FetchTimeout: 10 * time.Second, MaxAge: DefaultMaxAge}
}

// Key returns the key with the given ID, fetching the set when it does not
// hold it (see KeySet).
func (ks *KeySet) Key(ctx context.Context, kid string) (publicKey, error) {
	ks.mu.Lock()
	need := ks.started + 1 // the first fetch that starts after this call
	for {
		now := ks.Clock.Now()
		if k, ok := ks.cached(kid, now); ok {
			ks.mu.Unlock()
			return k, nil
		}
		mayFetch := ks.mayFetch(now)
		if ks.done >= need || (ks.lastErr != nil && ks.inflight == nil && !mayFetch) {
			// A set read since this call lacks the key, or fetches fail:
			// the failure is answered until the next fetch may run.
			err := ks.lastErr
			if err == nil {
				err = fmt.Errorf("%w: %q", ErrUnknownKey, kid)
			}
			ks.mu.Unlock()
			return publicKey{}, err
		}
		var fetched <-chan struct{}
		var slot <-chan time.Time
		switch {
		case ks.inflight != nil:
			fetched = ks.inflight.done
		case mayFetch:
			fetched = ks.startFetch(now).done
		default: // rate limited: wait for the next fetch's slot
			slot = ks.Clock.After(ks.attempted.Add(ks.minRefresh()).Sub(now))
		}
		ks.waiting++
		ks.mu.Unlock()
		var err error
		select {
		case <-fetched:
		case <-slot:
		case <-ctx.Done():
			err = fmt.Errorf("waiting for the JWKS: %w", ctx.Err())
		}
		ks.mu.Lock()
		ks.waiting--
		if err != nil {
			ks.mu.Unlock()
			return publicKey{}, err
		}
	}
}

// cached returns kid's key from a set that has not expired, starting a
// background refresh past half of MaxAge; an expired set is dropped.
// ks.mu is held.
func (ks *KeySet) cached(kid string, now time.Time) (publicKey, bool) {
	age, maxAge := now.Sub(ks.fetched), ks.maxAge()
	if ks.keys != nil && age >= maxAge {
		ks.keys = nil // expired: verify nothing until a fetch succeeds
	}
	k, ok := ks.keys[kid]
	if ok && age >= maxAge/2 && ks.mayFetch(now) {
		ks.startFetch(now) // refresh ahead of expiry; answer from the cache
	}
	return k, ok
}

// mayFetch reports whether a fetch may start now: none in flight, and at
// most one per MinRefresh (or per half MaxAge, if shorter, so that a set
// can always be refreshed before it expires). ks.mu is held.
func (ks *KeySet) mayFetch(now time.Time) bool {
	return ks.inflight == nil && (ks.attempted.IsZero() || now.Sub(ks.attempted) >= ks.minRefresh())
}

func (ks *KeySet) minRefresh() time.Duration {
	m := ks.MinRefresh
	if m <= 0 {
		m = DefaultMinRefresh
	}
	return min(m, ks.maxAge()/2)
}

// startFetch begins a fetch in the background; ks.mu is held.
func (ks *KeySet) startFetch(now time.Time) *fetchCall {
	call := &fetchCall{done: make(chan struct{})}
	ks.started++
	seq := ks.started
	ks.inflight, ks.attempted = call, now
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), ks.FetchTimeout)
		defer cancel()
		keys, err := ks.fetch(ctx)
		ks.mu.Lock()
		if err == nil {
			ks.keys, ks.fetched = keys, now
		}
		ks.lastErr, call.err, ks.inflight, ks.done = err, err, nil, seq
		report := ks.noteOutcome(err, now)
		ks.mu.Unlock()
		report() // before the waiters go on: their callers see the line
		close(call.done)
	}()
	return call
}

// noteOutcome counts failed fetches in a row and returns what to log: the
// first failure and the first success after failures, nothing else.
// ks.mu is held.
func (ks *KeySet) noteOutcome(err error, now time.Time) func() {
	log := ks.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	switch {
	case err != nil:
		ks.failures++
		if ks.failures > 1 {
			return func() {}
		}
		ks.failSince = now
		var until time.Time
		if ks.keys != nil {
			until = ks.fetched.Add(ks.maxAge())
		}
		return func() {
			if until.IsZero() {
				log.Warn("cannot fetch Nomad's JWKS: tokens checked against it are refused with 503 until a fetch succeeds",
					"url", ks.URL, "error", err)
				return
			}
			log.Warn("cannot fetch Nomad's JWKS: tokens of the keys cached are verified until they expire, others are refused with 503",
				"url", ks.URL, "error", err, "keys_expire", until.UTC().Format(time.RFC3339))
		}
	case ks.failures > 0:
		n, since := ks.failures, ks.failSince
		ks.failures = 0
		return func() {
			log.Info("fetched Nomad's JWKS again", "url", ks.URL, "failed_fetches", n, "failing_for", now.Sub(since).String())
		}
	}
	return func() {}
}

func (ks *KeySet) maxAge() time.Duration {
	if ks.MaxAge <= 0 {
		return DefaultMaxAge
	}
	return ks.MaxAge
}

func (ks *KeySet) fetch(ctx context.Context) (map[string]publicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ks.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("fetching JWKS: %w", err)
	}
	resp, err := ks.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching JWKS from %s: HTTP %d", ks.URL, resp.StatusCode)
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return nil, fmt.Errorf("decoding JWKS: %w", err)
	}
	keys := make(map[string]publicKey, len(set.Keys))
	for _, k := range set.Keys {
		pk, err := parseJWK(k)
		if err != nil {
			continue // a key type we do not use; others may still verify
		}
		keys[k.Kid] = pk
	}
	return keys, nil
}

func parseJWK(k jwk) (publicKey, error) {
	b64 := base64.RawURLEncoding
	switch k.Kty {
	case "RSA":
		n, err := b64.DecodeString(k.N)
		if err != nil {
			return publicKey{}, fmt.Errorf("jwk %q: modulus: %w", k.Kid, err)
		}
		e, err := b64.DecodeString(k.E)
		if err != nil {
			return publicKey{}, fmt.Errorf("jwk %q: exponent: %w", k.Kid, err)
		}
		eInt := new(big.Int).SetBytes(e)
		if !eInt.IsInt64() || eInt.Int64() < 3 || eInt.Int64() > 1<<31 {
			return publicKey{}, fmt.Errorf("jwk %q: bad exponent", k.Kid)
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(eInt.Int64())}
		if pub.N.BitLen() < 2048 {
			return publicKey{}, fmt.Errorf("jwk %q: RSA key shorter than 2048 bits", k.Kid)
		}
		return publicKey{alg: "RS256", key: pub}, nil
	case "OKP":
		if k.Crv != "Ed25519" {
			return publicKey{}, fmt.Errorf("jwk %q: curve %q not supported", k.Kid, k.Crv)
		}
		x, err := b64.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return publicKey{}, fmt.Errorf("jwk %q: bad Ed25519 key", k.Kid)
		}
		return publicKey{alg: "EdDSA", key: ed25519.PublicKey(x)}, nil
	}
	return publicKey{}, fmt.Errorf("jwk %q: key type %q not supported", k.Kid, k.Kty)
}
