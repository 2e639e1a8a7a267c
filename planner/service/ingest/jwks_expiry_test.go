package ingest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/planner/service/clock"
)

// A key removed from the JWKS (`nomad operator root keyring remove`) stops
// verifying tokens within 5 minutes (the default max age), even while
// tokens signed with it keep arriving (before, the set was re-fetched only
// for an unknown key ID, so a removed key verified tokens forever). The
// test uses only the defaults, so it also runs against the code before the
// fix (and fails there).
func TestKeySet_RemovedKeyIsRefusedWithinMaxAge(t *testing.T) {
	const bound = 5 * time.Minute
	for _, tc := range []struct {
		name  string
		every time.Duration // a token signed with the removed key arrives this often
	}{
		{"steady traffic refreshes in the background", 20 * time.Second},
		{"no traffic: the first token after the max age waits for the refresh", bound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeJWKS(t)
			now := time.Now()
			clk := clock.NewFake(now)
			v := newVerifier(f, clk)
			tok := f.sign(t, "RS256", "rsa-1", workload("train-a", now))
			_, err := v.Verify(context.Background(), tok)
			must.NoError(t, err)
			f.rsaRemoved.Store(true)

			refusedAt := time.Duration(-1)
			for elapsed := time.Duration(0); elapsed <= 2*bound; {
				clk.Advance(tc.every)
				elapsed += tc.every
				_, err := v.Verify(context.Background(), tok)
				if err != nil {
					must.ErrorIs(t, err, ErrUnauthenticated)
					must.StrContains(t, err.Error(), "unknown signing key")
					refusedAt = elapsed
					break
				}
				waitIdle(t, v.Keys) // a background refresh, if one started, lands
			}
			must.Positive(t, refusedAt, must.Sprintf("a removed key still verified tokens %s later", 2*bound))
			must.LessEq(t, bound, refusedAt)
			// The other key still verifies.
			_, err = v.Verify(context.Background(), f.sign(t, "EdDSA", "ed-1", workload("train-a", now)))
			must.NoError(t, err)
		})
	}
}

// Past MaxAge a set that cannot be refreshed verifies nothing: the fetch's
// error is returned (the handler answers 503), never a stale key.
func TestKeySet_ExpiredSetFailsClosed(t *testing.T) {
	f := newFakeJWKS(t)
	clk := clock.NewFake(time.Now())
	g := newGatedJWKS(t, f)
	g.open()
	ks := NewKeySet(g.URL, nil, clk)
	ks.MaxAge = time.Minute
	_, err := ks.Key(context.Background(), "rsa-1")
	must.NoError(t, err)
	g.failing.Store(true)
	clk.Advance(61 * time.Second)
	_, err = ks.Key(context.Background(), "rsa-1")
	must.Error(t, err)
	must.False(t, errors.Is(err, ErrUnknownKey))
	must.StrContains(t, err.Error(), "HTTP 502")
	g.failing.Store(false)
	clk.Advance(11 * time.Second)
	_, err = ks.Key(context.Background(), "rsa-1")
	must.NoError(t, err)
}

// Inside half of MaxAge a known key never causes a fetch.
func TestKeySet_FreshSetIsNotRefetched(t *testing.T) {
	f := newFakeJWKS(t)
	clk := clock.NewFake(time.Now())
	ks := NewKeySet(f.URL, nil, clk)
	for i := 0; i < 10; i++ {
		_, err := ks.Key(context.Background(), "rsa-1")
		must.NoError(t, err)
		clk.Advance(DefaultMaxAge / 2 / 11)
	}
	must.Eq(t, int32(1), f.fetches.Load())
}

// waitIdle waits until no fetch is in flight.
func waitIdle(t *testing.T, ks *KeySet) {
	t.Helper()
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		ks.mu.Lock()
		defer ks.mu.Unlock()
		return ks.inflight == nil
	}), wait.Timeout(5*time.Second), wait.Gap(time.Millisecond)))
}
