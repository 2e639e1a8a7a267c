package adversarial

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/e2e/harness"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

// Consul restarted with its state lost (a dev agent keeps it in memory):
// the planner's registration, check, session and lock are gone. Expected:
// the planner registers again and is elected leader again, without a
// restart of its own.
func TestPlanner_ReregistersAfterConsulLosesItsState(t *testing.T) {
	c := harness.Cluster(t)
	p := plStart(t, c, "relost")
	p.waitLeading(t, true, time.Minute)

	plRestartConsulLosingState(t, c)
	services, _, err := c.Consul.Catalog().Service("caravan-planner", "", nil)
	must.NoError(t, err)
	t.Logf("consul restarted; %d planner registrations survive", len(services))

	harness.Eventually(t, 2*time.Minute, func() error {
		services, _, err := c.Consul.Catalog().Service("caravan-planner", "", nil)
		if err != nil {
			return err
		}
		for _, s := range services {
			if s.ServiceID == "caravan-planner-adv-relost" {
				return nil
			}
		}
		return fmt.Errorf("planner not registered again yet")
	})
	harness.Eventually(t, 2*time.Minute, func() error {
		pair, _, err := c.Consul.KV().Get("caravan/planner/leader", nil)
		if err != nil {
			return err
		}
		if pair == nil || pair.Session == "" || !strings.HasPrefix(string(pair.Value), "caravan-planner-adv-relost ") {
			return fmt.Errorf("no leader elected yet: %+v", pair)
		}
		return nil
	})
	p.waitLeading(t, true, time.Minute)
}

// Consul frozen (SIGSTOP): the leader cannot renew its session. Expected:
// it stops leading (so stops writing) within one session TTL, writes
// nothing to Nomad while frozen, and leads and writes again after SIGCONT.
func TestPlanner_LeaderStopsWritingWhileConsulIsFrozen(t *testing.T) {
	c := harness.Cluster(t)
	p := plStart(t, c, "frozen")
	p.waitLeading(t, true, time.Minute)

	thaw := plFreezeConsul(t, c)
	frozen := time.Now()
	p.waitLeading(t, false, plSessionTTL+10*time.Second)
	t.Logf("leadership fenced %s after Consul was frozen (session TTL %s)", time.Since(frozen).Round(100*time.Millisecond), plSessionTTL)
	must.Less(t, plSessionTTL+plSessionTTL/3+5*time.Second, time.Since(frozen))

	// A job the planner would grow (4 GPUs free, it asks for up to 2):
	// while Consul is frozen, no planner write reaches it.
	id := plRunSim(t, c, "adv-frozen", "count=1", "max_workers=2")
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		must.SliceEmpty(t, plPlannerEvents(t, c, id), must.Sprint("the planner wrote while it could not confirm its session"))
		time.Sleep(time.Second)
	}
	var plan struct {
		Leader  bool `json:"leader"`
		Actions []struct {
			Status string `json:"status"`
		} `json:"actions"`
	}
	must.NoError(t, harness.GetJSON(p.url+"/v1/plan", &plan))
	must.False(t, plan.Leader)
	for _, a := range plan.Actions {
		must.NotEq(t, "applied", a.Status)
	}

	thaw()
	thawed := time.Now()
	p.waitLeading(t, true, 2*time.Minute)
	t.Logf("leading again %s after SIGCONT", time.Since(thawed).Round(100*time.Millisecond))
	harness.Eventually(t, 3*time.Minute, func() error {
		if len(plPlannerEvents(t, c, id)) == 0 {
			return fmt.Errorf("%s: no planner write yet after the thaw", id)
		}
		return nil
	})
}

// A managed job's task, with its own valid identity, reports the sample that
// once poisoned the planner (step 2^63-1, loss 1e308) and its kin.
// Expected: each is refused with 400 naming the field, the job's model stays
// sane, and /v1/jobs and /v1/plan keep answering 200 for every job.
func TestPlanner_PoisonedProgressIsRefused(t *testing.T) {
	c := harness.Cluster(t)
	p := plStart(t, c, "poison")
	p.waitLeading(t, true, time.Minute)
	id := plRunSim(t, c, "adv-poison", "count=1", "max_workers=1")
	token := plTaskToken(t, c, id, "train")
	harness.Eventually(t, 2*time.Minute, func() error {
		jobs, err := p.jobs()
		if err != nil {
			return err
		}
		if jobs[id].Model.Step == 0 {
			return fmt.Errorf("no progress from %s yet", id)
		}
		return nil
	})

	cases := []struct{ body, field string }{
		{`{"step": 9223372036854775807, "loss": 1e308, "samples_per_sec": 1}`, "step"},
		{`{"step": 1, "loss": 1e308, "samples_per_sec": 1}`, "loss"},
		{`{"step": 1, "loss": 0.5, "samples_per_sec": 1e300}`, "samples_per_sec"},
		{`{"step": 100000000000000, "loss": 0.5, "samples_per_sec": 1}`, "step"},
		{`{"step": 1, "loss": 0.5, "samples_per_sec": 1, "workers": -3}`, "workers"},
		{`{"step": 1, "samples_per_sec": 1}`, "loss"},
		// Once accepted with 204, then failing the job's convergence fit.
		{`{"step": 1, "loss": 0, "samples_per_sec": 1}`, "loss"},
		{`{"step": 1, "loss": -0, "samples_per_sec": 1}`, "loss"},
	}
	for _, tc := range cases {
		code, eb, err := p.post(token, tc.body)
		must.NoError(t, err)
		must.Eq(t, http.StatusBadRequest, code, must.Sprint(tc.body))
		must.Eq(t, tc.field, eb.Field, must.Sprint(eb.Error))
		must.StrContains(t, eb.Error, tc.field)
	}

	for _, path := range []string{"/v1/jobs", "/v1/plan", "/v1/jobs/default/" + id} {
		var v map[string]any
		must.NoError(t, harness.GetJSON(p.url+path, &v), must.Sprint(path))
	}
	jobs, err := p.jobs()
	must.NoError(t, err)
	j := jobs[id]
	must.Eq(t, "", j.RenderError)
	must.Less(t, int64(1_000_000), j.Model.Step)
	must.LessEq(t, 2.0, j.Model.Loss)
}

// Tokens with forged key IDs flood the planner (each makes it look for the
// key in Nomad's JWKS), while the JWKS, served through a proxy under the
// test's control, holds every fetch the flood causes until the test lets it
// go. Expected: with a fetch held and every flooding client's forgery in
// flight, a legitimate report is accepted (it must not queue behind the
// forgeries' fetch: were it to, it could not return before the release and
// its 30 s client timeout would fail it); once the fetch is released every
// forgery gets 401.
//
// On an agent without a JWKS (Nomad 1.6) it skips; planner/service
// TestAgent_ForgedKeyIDFloodDoesNotStallReports backs the same claim there
// (the whole planner against a fake JWKS that holds the fetch).
func TestPlanner_ForgedKeyIDFloodDoesNotStallReports(t *testing.T) {
	c := harness.Cluster(t)
	harness.NeedsFeature(t, c, harness.FeatureJWKS, "planner/service TestAgent_ForgedKeyIDFloodDoesNotStallReports")
	var hold atomic.Bool // set while the flood runs: fetches wait for release
	held := make(chan struct{})
	release := make(chan struct{})
	var heldOnce, releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hold.Load() {
			heldOnce.Do(func() { close(held) })
			<-release
		}
		resp, err := http.Get(c.NomadAddr + "/.well-known/jwks.json")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	defer slow.Close()
	defer letGo() // before slow.Close, which waits for its handlers
	p := plStartWith(t, c, "forged", plOpts{extra: fmt.Sprintf("progress {\n  jwks_url = %q\n}\n", slow.URL)})
	p.waitLeading(t, true, time.Minute)
	id := plRunSim(t, c, "adv-forged", "count=1", "max_workers=1")
	token := plTaskToken(t, c, id, "train")
	var step int64
	harness.Eventually(t, 2*time.Minute, func() error {
		jobs, err := p.jobs()
		if err != nil {
			return err
		}
		if step = jobs[id].Model.Step; step == 0 {
			return fmt.Errorf("no progress from %s yet", id)
		}
		return nil
	})

	// The forgeries name the planner's audience, so the planner checks
	// them against the JWKS (the task's own default identity is checked
	// online, and not slowed by the JWKS).
	parts := strings.Split(token, ".")
	claims := plClaims(t, token)
	claims["aud"] = []string{"caravan-planner"}
	payload, err := json.Marshal(claims)
	must.NoError(t, err)
	forge := func() string {
		kid := make([]byte, 12)
		_, _ = rand.Read(kid)
		hdr, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": base64.RawURLEncoding.EncodeToString(kid)})
		return base64.RawURLEncoding.EncodeToString(hdr) + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + parts[2]
	}
	const clients = 16
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var started, inFlight, forged, not401 atomic.Int64
	hold.Store(true)
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
				started.Add(1)
				inFlight.Add(1)
				code, _, err := p.post(forge(), `{"step": 1, "loss": 1, "samples_per_sec": 1}`)
				inFlight.Add(-1)
				forged.Add(1)
				if err != nil || code != http.StatusUnauthorized {
					not401.Add(1)
				}
			}
		}()
	}
	stopFlood := sync.OnceFunc(func() { close(stop) })
	defer func() { stopFlood(); letGo(); wg.Wait() }() // on a failure too
	// The flood is in: a JWKS fetch is held, and every client has a
	// forgery outstanding (or, where forgeries do not wait for the fetch,
	// 2 x clients more were sent while it is held).
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("the forged key IDs caused no JWKS fetch within a minute")
	}
	atHold := started.Load()
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		return inFlight.Load() == clients || started.Load()-atHold >= 2*clients
	}), wait.Timeout(time.Minute), wait.Gap(time.Millisecond)))

	code, eb, err := p.post(token, fmt.Sprintf(`{"step": %d, "loss": 0.5, "samples_per_sec": 32}`, step))
	must.NoError(t, err, must.Sprint("the legitimate report, sent while the flood's JWKS fetch was held"))
	must.Eq(t, http.StatusNoContent, code, must.Sprint(eb.Error))
	inAtReport := inFlight.Load()

	// Release the fetch: the held forgeries and those that follow get 401.
	hold.Store(false)
	letGo()
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool { return forged.Load() >= 4*clients }),
		wait.Timeout(time.Minute), wait.Gap(10*time.Millisecond)))
	stopFlood()
	wg.Wait()
	t.Logf("legitimate report accepted with the flood's JWKS fetch held (%d forgeries in flight); %d forged-kid reports, all 401",
		inAtReport, forged.Load())
	must.Eq(t, int64(0), not401.Load(), must.Sprintf("of %d forged-kid reports, %d did not get 401", forged.Load(), not401.Load()))
	must.GreaterEq(t, int64(4*clients), forged.Load())
}

// A task whose planner identity has no ttl gets a token without exp: a
// credential that never expires. Expected: the planner refuses it with 401
// naming exp, while the same identity with a ttl is verified (and then
// refused only because the job is not managed by the planner: 403).
// On an agent without a JWKS or named identities (Nomad 1.6) it skips;
// planner/service TestAgent_TokenWithoutExpIsRefused backs the claim there.
func TestPlanner_TokenWithoutExpIsRefused(t *testing.T) {
	c := harness.Cluster(t)
	const covered = "planner/service TestAgent_TokenWithoutExpIsRefused"
	harness.NeedsFeature(t, c, harness.FeatureJWKS, covered)
	harness.NeedsFeature(t, c, harness.FeatureNamedIdentities, covered)
	p := plStart(t, c, "noexp")
	p.waitLeading(t, true, time.Minute)
	sample := `{"step": 1, "loss": 1, "samples_per_sec": 1}`

	forever := c.RunJob(t, "e2e/adversarial/testdata/planner-identity.nomad.hcl", "name=adv-noexp", "named=true", "ttl=")
	token := plTaskToken(t, c, forever, "hold")
	_, hasExp := plClaims(t, token)["exp"]
	must.False(t, hasExp, must.Sprint("Nomad gave an identity without ttl an exp claim; the test needs one without"))
	code, eb, err := p.post(token, sample)
	must.NoError(t, err)
	must.Eq(t, http.StatusUnauthorized, code)
	must.StrContains(t, eb.Error, "exp")

	expiring := c.RunJob(t, "e2e/adversarial/testdata/planner-identity.nomad.hcl", "name=adv-exp", "named=true", "ttl=1h")
	token = plTaskToken(t, c, expiring, "hold")
	_, hasExp = plClaims(t, token)["exp"]
	must.True(t, hasExp)
	code, eb, err = p.post(token, sample)
	must.NoError(t, err)
	must.Eq(t, http.StatusForbidden, code, must.Sprint(eb.Error))
}

// The leader is killed (kill -9) in the middle of applying a plan that grows
// two jobs (one change per round, so the plan spans two rounds and the kill
// lands after the first write), and started again at once with the same
// identity. Expected: it leads again (after its old session lapses),
// finishes the plan, and no decision is written twice: each job gets
// exactly one planner scale-up.
func TestPlanner_RestartedMidRound(t *testing.T) {
	c := harness.Cluster(t)
	oneChange := "max_changes_per_round = 1"
	p := plStartWith(t, c, "midround", plOpts{policy: oneChange})
	p.waitLeading(t, true, time.Minute)
	a := plRunSim(t, c, "adv-mid-a", "count=1", "max_workers=2")
	b := plRunSim(t, c, "adv-mid-b", "count=1", "max_workers=2")
	grown := func(id string) int {
		n := 0
		for _, ev := range plPlannerEvents(t, c, id) {
			if count, ok := submit.EventCount(&ev); ok && count == 2 {
				n++
			}
		}
		return n
	}
	// Kill it as soon as its first write lands: the round is being applied.
	harness.Eventually(t, 3*time.Minute, func() error {
		if grown(a)+grown(b) == 0 {
			return fmt.Errorf("no planner write yet")
		}
		return nil
	})
	p.kill9()
	t.Logf("killed the leader with a and b grown %d and %d times", grown(a), grown(b))

	again := plStartWith(t, c, "midround", plOpts{port: p.port, policy: oneChange})
	restarted := time.Now()
	again.waitLeading(t, true, 3*plSessionTTL+time.Minute)
	t.Logf("restarted planner leads %s after the restart", time.Since(restarted).Round(100*time.Millisecond))
	harness.Eventually(t, 3*time.Minute, func() error {
		if grown(a) == 0 || grown(b) == 0 {
			return fmt.Errorf("plan not finished: a grown %d times, b %d", grown(a), grown(b))
		}
		return nil
	})
	// Four more rounds (counted by the time of /v1/plan's round, not
	// slept): nothing is written again.
	rounds := map[time.Time]bool{}
	harness.Eventually(t, time.Minute, func() error {
		var r struct {
			Time   time.Time `json:"time"`
			Leader bool      `json:"leader"`
		}
		if err := harness.GetJSON(again.url+"/v1/plan", &r); err != nil {
			return err
		}
		if r.Leader {
			rounds[r.Time] = true
		}
		if len(rounds) < 5 { // the first may be the round that finished the plan
			return fmt.Errorf("%d leading rounds seen since the plan finished", len(rounds))
		}
		return nil
	})
	must.Eq(t, 1, grown(a))
	must.Eq(t, 1, grown(b))
	for _, id := range []string{a, b} {
		job, _, err := c.Nomad.Jobs().Info(id, nil)
		must.NoError(t, err)
		must.Eq(t, 2, *job.TaskGroups[0].Count)
	}
}
