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
// outside the lock, one at a time (concurrent callers share it), at most
// once per MinRefresh whether they succeed or fail (a failure is returned to
// callers until then); and a key ID still unknown after a fetch is
// remembered as unknown for UnknownTTL.
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
	UnknownTTL time.Duration
	// MaxAge bounds how long a fetched key set is trusted (DefaultMaxAge;
	// 0 or less: the default).
	MaxAge time.Duration
	// FetchTimeout bounds one fetch (it does not end when the caller that
	// started it gives up: others may be waiting for it).
	FetchTimeout time.Duration

	mu        sync.Mutex
	keys      map[string]publicKey
	fetched   time.Time // start of the fetch that returned keys
	attempted time.Time // last fetch start; zero before the first
	lastErr   error     // the last fetch's error, nil after a success
	inflight  *fetchCall
	unknown   map[string]time.Time // kid -> remembered as unknown until
}

type fetchCall struct {
	done chan struct{}
	err  error
}

// DefaultMaxAge is the longest a fetched key set is trusted: a key removed
// from Nomad's JWKS is refused within about this long.
const DefaultMaxAge = 5 * time.Minute

// maxUnknown bounds the negative cache (forged IDs are unbounded).
const maxUnknown = 4096

// NewKeySet returns a KeySet for url.
func NewKeySet(url string, hc *http.Client, clk clock.Clock) *KeySet {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	if clk == nil {
		clk = clock.Real{}
	}
	return &KeySet{URL: url, HTTP: hc, Clock: clk, MinRefresh: 10 * time.Second, UnknownTTL: 30 * time.Second,
		FetchTimeout: 10 * time.Second, MaxAge: DefaultMaxAge}
}

// Key returns the key with the given ID, refreshing the set if allowed.
func (ks *KeySet) Key(ctx context.Context, kid string) (publicKey, error) {
	for attempt := 0; ; attempt++ {
		ks.mu.Lock()
		now := ks.Clock.Now()
		age, maxAge := now.Sub(ks.fetched), ks.maxAge()
		// At most one fetch per MinRefresh (or per half MaxAge, if shorter,
		// so that a set can always be refreshed before it expires).
		mayFetch := ks.inflight == nil && (ks.attempted.IsZero() || now.Sub(ks.attempted) >= min(ks.MinRefresh, maxAge/2))
		if k, ok := ks.keys[kid]; ok && age < maxAge {
			if age >= maxAge/2 && mayFetch {
				ks.startFetch(now) // refresh ahead of expiry; answer from the cache
			}
			ks.mu.Unlock()
			return k, nil
		}
		if ks.keys != nil && age >= maxAge {
			ks.keys, ks.unknown = nil, nil // expired: verify nothing until a fetch succeeds
		}
		if until, ok := ks.unknown[kid]; ok && now.Before(until) {
			ks.mu.Unlock()
			return publicKey{}, fmt.Errorf("%w: %q", ErrUnknownKey, kid)
		}
		call := ks.inflight
		if call == nil && attempt == 0 && mayFetch {
			call = ks.startFetch(now)
		}
		if call == nil {
			// Rate limited, or our own wait ended: answer from the cache.
			err := ks.lastErr // a failed fetch is answered until the next may run
			if err == nil {
				ks.rememberUnknown(kid, now)
				err = fmt.Errorf("%w: %q", ErrUnknownKey, kid)
			}
			ks.mu.Unlock()
			return publicKey{}, err
		}
		ks.mu.Unlock()
		select {
		case <-call.done:
		case <-ctx.Done():
			return publicKey{}, fmt.Errorf("waiting for the JWKS: %w", ctx.Err())
		}
		if call.err != nil {
			return publicKey{}, call.err
		}
		// Look again (the set is fresh), without starting another fetch.
	}
}

// startFetch begins a fetch in the background; ks.mu is held.
func (ks *KeySet) startFetch(now time.Time) *fetchCall {
	call := &fetchCall{done: make(chan struct{})}
	ks.inflight, ks.attempted = call, now
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), ks.FetchTimeout)
		defer cancel()
		keys, err := ks.fetch(ctx)
		ks.mu.Lock()
		if err == nil {
			ks.keys, ks.unknown, ks.fetched = keys, nil, now // a new set: forget what was unknown
		}
		ks.lastErr, call.err, ks.inflight = err, err, nil
		ks.mu.Unlock()
		close(call.done)
	}()
	return call
}

func (ks *KeySet) maxAge() time.Duration {
	if ks.MaxAge <= 0 {
		return DefaultMaxAge
	}
	return ks.MaxAge
}

// rememberUnknown caches kid as unknown; ks.mu is held.
func (ks *KeySet) rememberUnknown(kid string, now time.Time) {
	if ks.unknown == nil || len(ks.unknown) >= maxUnknown {
		ks.unknown = map[string]time.Time{}
	}
	ks.unknown[kid] = now.Add(ks.UnknownTTL)
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
