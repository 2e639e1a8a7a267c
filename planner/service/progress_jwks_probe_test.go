package service

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/planner/service/config"
)

// The router's periodic probe of the JWKS URL (is a JWKS offered?) is held
// when its answer goes stale. Expected: reports with a known key are
// accepted from the last answer while the probe is still held (they do not
// queue behind it), and however many arrive, one probe runs.
func TestAgent_JWKSProbeDoesNotStallReports(t *testing.T) {
	jwks := newJWKSEndpoint(t, "k1")
	p := startJWKSPlanner(t, jwks)
	good := jwks.token(t, "k1", p.clk.Now(), time.Hour)
	p.accepted(t, good)
	p.settle(t)
	maxAge := config.MaxJWKSMaxAge // the probe's period and the key set's age

	// Past half its age the key set is refreshed (in the background), so
	// that it is still fresh when the probe's answer goes stale.
	p.clk.Advance(maxAge * 6 / 10)
	before := jwks.started.Load()
	p.accepted(t, good)
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		return jwks.ended.Load() == before+1
	}), wait.Timeout(time.Minute), wait.Gap(5*time.Millisecond)), must.Sprint("the key set was not refreshed"))
	must.Eq(t, before+1, jwks.started.Load())

	p.clk.Advance(maxAge*4/10 + time.Second) // the probe's answer is stale now
	held := jwks.holdFetches()
	const reports = 4
	var wg sync.WaitGroup
	answers := make(chan string, reports)
	for i := 0; i < reports; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, msg, err := p.post(good)
			answers <- fmt.Sprintf("HTTP %d %s %v (JWKS requests ended %d)", code, msg, err, jwks.ended.Load())
		}()
	}
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("no probe of the JWKS URL once its answer went stale")
	}
	wg.Wait()
	close(answers)
	want := fmt.Sprintf("HTTP %d  <nil> (JWKS requests ended %d)", http.StatusNoContent, before+1)
	for got := range answers {
		must.Eq(t, want, got, must.Sprint("a report with a known key waited behind the held probe, or was refused"))
	}
	must.Eq(t, before+2, jwks.started.Load(), must.Sprint("want one probe, and no key-set fetch"))

	jwks.release()
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		return jwks.ended.Load() == before+2
	}), wait.Timeout(time.Minute), wait.Gap(5*time.Millisecond)), must.Sprint("the released probe did not end"))
	code, msg, err := p.post(good)
	must.NoError(t, err)
	must.Eq(t, http.StatusNoContent, code, must.Sprint(msg))
}
