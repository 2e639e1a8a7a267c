package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/clock"
)

// syncBuffer is a bytes.Buffer safe for a logger in another goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// outageVerifier fails with a non-authentication error (the JWKS cannot
// be fetched) while down is set.
type outageVerifier struct{ down atomic.Bool }

func (o *outageVerifier) Verify(context.Context, string) (Identity, error) {
	if o.down.Load() {
		return Identity{}, errors.New("fetching JWKS from http://nomad/.well-known/jwks.json: HTTP 502")
	}
	return Identity{Namespace: "default", JobID: "train-a", AllocationID: "alloc-1", Task: "train"}, nil
}

// A JWKS outage logged one WARN per refused report (6,021 lines in 10
// minutes, issue 29). Now: the first refusal at once, then at most one
// summary a minute with the count, and one line when tokens verify again.
func TestHandler_OutageLogsAtABoundedRate(t *testing.T) {
	var buf bytes.Buffer
	clk := clock.NewFake(time.Now())
	v := &outageVerifier{}
	v.down.Store(true)
	h := &Handler{Verifier: v, Store: NewStore(10), Clock: clk,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})}
	step := 1000
	post := func() int {
		step++
		body := fmt.Sprintf(`{"step": %d, "loss": 0.5, "samples_per_sec": 10, "workers": 4, "steps_total": 5000}`, step)
		req := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	// 10 minutes at 10 reports a second.
	for i := 0; i < 6000; i++ {
		must.Eq(t, http.StatusServiceUnavailable, post())
		clk.Advance(100 * time.Millisecond)
	}
	v.down.Store(false)
	must.Eq(t, http.StatusNoContent, post())
	must.Eq(t, http.StatusNoContent, post())

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	must.SliceLen(t, 11, lines, must.Sprint(buf.String())) // first + 9 summaries + recovery
	must.StrContains(t, lines[0], "[WARN]  cannot verify progress tokens now: refusing reports with 503")
	must.StrContains(t, lines[0], "HTTP 502")
	must.StrContains(t, lines[1], "still cannot verify progress tokens")
	must.StrContains(t, lines[1], "refused=600 refused_total=601")
	must.StrContains(t, lines[10], "[INFO]  progress tokens verify again: refused_total=6000 outage=10m")
}

// The first failed JWKS fetch is logged (a background refresh included),
// later failures are not, and the first success after them is.
func TestKeySet_LogsFirstFailureAndRecovery(t *testing.T) {
	var buf syncBuffer
	f := newFakeJWKS(t)
	clk := clock.NewFake(time.Now())
	g := newGatedJWKS(t, f)
	g.open()
	ks := NewKeySet(g.URL, nil, clk)
	ks.Logger = hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	_, err := ks.Key(context.Background(), "rsa-1")
	must.NoError(t, err)
	g.failing.Store(true)
	// Past half the max age a known key refreshes in the background; it
	// fails, and is answered from the cache meanwhile.
	for elapsed := 10 * time.Second; elapsed <= 2*DefaultMaxAge; elapsed += 10 * time.Second {
		clk.Advance(10 * time.Second)
		_, err = ks.Key(context.Background(), "rsa-1")
		if elapsed < DefaultMaxAge {
			must.NoError(t, err)
		} else {
			must.ErrorContains(t, err, "HTTP 502") // expired: fail closed
		}
		waitIdle(t, ks)
	}
	must.Greater(t, 10, g.fetches.Load())
	g.failing.Store(false)
	clk.Advance(ks.MinRefresh)
	_, err = ks.Key(context.Background(), "rsa-1")
	must.NoError(t, err)

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	must.SliceLen(t, 2, lines, must.Sprint(buf.String()))
	must.StrContains(t, lines[0], "[WARN]  cannot fetch Nomad's JWKS: tokens of the keys cached are verified until they expire")
	must.StrContains(t, lines[0], "HTTP 502")
	must.StrContains(t, lines[0], "keys_expire=")
	must.StrContains(t, lines[1], "[INFO]  fetched Nomad's JWKS again")
}
