package ui

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/model"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/manager"
	"github.com/caravan-nomad/caravan/planner/service/source"
)

// evil is a job name a user could submit.
const evil = `<script>alert(1)</script>"'&<img src=x onerror=alert(2)>`

type fakePlanner struct {
	round   *manager.Round
	history []manager.Decision
}

func (f *fakePlanner) Last() *manager.Round { return f.round }
func (f *fakePlanner) History(ns, id string) []manager.Decision {
	return f.history
}

type fakeProgress map[ingest.JobKey][]ingest.Record

func (f fakeProgress) Records(k ingest.JobKey) []ingest.Record { return f[k] }

type fakeNomad struct {
	calls  int
	nodes  []*nomadapi.NodeListStub
	allocs []*nomadapi.AllocationListStub
	stats  map[string]*nomadapi.AllocResourceUsage
	events *nomadapi.JobScaleStatusResponse
}

func (f *fakeNomad) Nodes(context.Context) ([]*nomadapi.NodeListStub, error) {
	f.calls++
	return f.nodes, nil
}
func (f *fakeNomad) Allocations(context.Context) ([]*nomadapi.AllocationListStub, error) {
	return f.allocs, nil
}
func (f *fakeNomad) Stats(_ context.Context, id string) (*nomadapi.AllocResourceUsage, error) {
	if s, ok := f.stats[id]; ok {
		return s, nil
	}
	return nil, errors.New("client unreachable")
}
func (f *fakeNomad) ScaleStatus(context.Context, string, string) (*nomadapi.JobScaleStatusResponse, error) {
	return f.events, nil
}

func i64(v int64) *int64 { return &v }
func ptr[T any](v T) *T  { return &v }

// fixture is a round with one job named evil, its progress, a GPU with
// two of four shares held by it, and Nomad scaling events with an evil
// message.
func fixture(t *testing.T, token string) (*Server, *fakeNomad) {
	t.Helper()
	now := time.Now()
	job := manager.JobView{Namespace: "default", ID: evil, State: manager.StateRunning, Group: "worker", Workers: 2, Running: 2, PS: 1,
		Spec: source.Spec{WorkerGroup: "worker", MinWorkers: 1, MaxWorkers: 4, TargetLoss: 0.2},
		Fit: manager.Fit{Step: 1000, Loss: 0.5, Batch: 32, RemainingSteps: 3000, RemainingSource: "fit",
			Convergence: &model.Convergence{B0: 0.002, B1: 1, B2: 0.1},
			Speed:       &model.Speed{Form: model.PSSync, Theta: []float64{0.01, 0.02, 0, 0, 0}, MaxWorkers: 2},
			SpeedSamples: []model.SpeedSample{{Workers: 1, PS: 1, Nodes: 1, Batch: 32, StepsPerSec: 10},
				{Workers: 2, PS: 1, Nodes: 1, Batch: 32, StepsPerSec: 18}}},
		Predicted: map[int]float64{1: 300, 2: 170, 3: 120, 4: -1},
		Plan:      &policy.JobPlan{ID: "default/" + evil, Allocation: policy.Allocation{Workers: 3, PS: 1}, Gain: 50, PredictedRemaining: 120, Reason: evil},
	}
	r := &manager.Round{Time: now, Leader: true, Policy: "optimus", Jobs: []manager.JobView{job},
		Actions: []manager.Action{{Job: "default/" + evil, Kind: manager.KindScale, From: 2, To: 3, Status: manager.StatusApplied, Message: evil}},
		Candidates: []manager.Candidate{
			{Job: "default/" + evil, Kind: manager.KindScale, From: 2, To: 3, Gain: 50, Verdict: manager.VerdictApplied, Detail: evil},
			{Job: "default/other", From: 1, To: 2, Gain: 5, Verdict: manager.VerdictRestartCost, Detail: "does not repay"},
		}}
	var recs []ingest.Record
	for k := int64(0); k <= 1000; k += 50 {
		recs = append(recs, ingest.Record{Sample: ingest.Sample{Step: k, Loss: 1/(0.002*float64(k)+1) + 0.1}, Time: now})
	}
	nm := &fakeNomad{
		nodes: []*nomadapi.NodeListStub{{ID: "n1", Name: "client1", NodeResources: &nomadapi.NodeResources{Devices: []*nomadapi.NodeDeviceResource{{
			Vendor: "caravan", Type: "gpushare", Name: "sim",
			Attributes: map[string]*nomadapi.Attribute{"index": {IntVal: i64(3)}, "model": {StringVal: ptr("A100")}, "simulated": {BoolVal: ptr(true)}},
			Instances: []*nomadapi.NodeDevice{{ID: "GPU-a-share-0", Healthy: true}, {ID: "GPU-a-share-1", Healthy: true},
				{ID: "GPU-a-share-2", Healthy: true}, {ID: "GPU-a-share-3", Healthy: false}},
		}}}}},
		allocs: []*nomadapi.AllocationListStub{{ID: "alloc-1", Name: evil + ".worker[0]", Namespace: "default", JobID: evil, NodeID: "n1",
			ClientStatus: "running", AllocatedResources: &nomadapi.AllocatedResources{Tasks: map[string]*nomadapi.AllocatedTaskResources{
				"trainer": {Devices: []*nomadapi.AllocatedDeviceResource{{Vendor: "caravan", Type: "gpushare", Name: "sim",
					DeviceIDs: []string{"GPU-a-share-0", "GPU-a-share-1"}}}}}}}},
		stats: map[string]*nomadapi.AllocResourceUsage{"alloc-1": {Tasks: map[string]*nomadapi.TaskResourceUsage{"trainer": {
			ResourceUsage: &nomadapi.ResourceUsage{DeviceStats: []*nomadapi.DeviceGroupStats{{InstanceStats: map[string]*nomadapi.DeviceStats{
				"GPU-a-share-0": {Stats: &nomadapi.StatObject{Attributes: map[string]*nomadapi.StatValue{
					"memory_used": {IntNumeratorVal: i64(1024), IntDenominatorVal: i64(20480)}, "sm_utilization": {IntNumeratorVal: i64(37)},
					"over_limit": {BoolVal: ptr(false)}}}},
			}}}}}}}},
		events: &nomadapi.JobScaleStatusResponse{TaskGroups: map[string]nomadapi.TaskGroupScaleStatus{"worker": {Events: []nomadapi.ScalingEvent{
			{Time: uint64(now.Add(-time.Minute).UnixNano()), Count: i64(2), PreviousCount: 1, Message: "caravan planner: " + evil},
		}}}},
	}
	s, err := New(&Server{
		Planner:  &fakePlanner{round: r, history: []manager.Decision{{Time: now, Kind: manager.KindScale, From: 2, To: 3, Gain: 50, Verdict: manager.VerdictApplied, Reason: evil}}},
		Progress: fakeProgress{{Namespace: "default", ID: evil}: recs},
		Cluster:  &Gatherer{Nomad: nm, Device: "caravan/gpushare", TTL: time.Hour},
		Token:    token, ID: evil,
	})
	must.NoError(t, err)
	return s, nm
}

func get(t *testing.T, h http.Handler, path string, mod func(*http.Request)) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if mod != nil {
		mod(req)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	must.NoError(t, err)
	return string(b)
}

func TestPages_EscapeHostileNames(t *testing.T) {
	s, _ := fixture(t, "")
	h := s.Handler()
	paths := []string{"/ui/cluster", "/ui/jobs", "/ui/plan", JobPath("default", evil)}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			resp := get(t, h, p, nil)
			b := body(t, resp)
			must.Eq(t, http.StatusOK, resp.StatusCode, must.Sprintf("%s", b))
			must.StrContains(t, resp.Header.Get("Content-Type"), "text/html")
			must.StrNotContains(t, b, "<script>")
			must.StrNotContains(t, b, "<img src=x")
			must.StrContains(t, b, "&lt;script&gt;")
			must.StrContains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
		})
	}
}

func TestPages_Content(t *testing.T) {
	s, _ := fixture(t, "")
	h := s.Handler()

	b := body(t, get(t, h, JobPath("default", evil), nil))
	must.StrContains(t, b, `id="`+IDLossFit+`" class="`+ClassLossFit+`"`)
	must.StrContains(t, b, `id="`+IDSpeedFit+`"`)
	must.StrContains(t, b, "target loss")
	must.StrContains(t, b, "50.00 s") // marginal gain of the 3rd worker: 170 - 120
	must.StrContains(t, b, "never")   // 4 workers: never
	must.StrContains(t, b, "v-applied")
	must.StrContains(t, b, "1 → 2") // the Nomad scaling event

	b = body(t, get(t, h, "/ui/cluster", nil))
	must.StrContains(t, b, "GPU-a")
	must.StrContains(t, b, "2 of 4 shares held")
	must.StrContains(t, b, "GPU 3")
	must.StrContains(t, b, "simulated")
	must.StrContains(t, b, "1024 / 20480")
	must.StrContains(t, b, "37 %")
	must.StrContains(t, b, "#0 #1")                                     // one row for the reservation's two shares
	must.StrContains(t, b, `data-shares="GPU-a-share-0 GPU-a-share-1"`) // the browser test reads these
	must.StrContains(t, b, "#3 <b class=\"v-write-failed\">unhealthy")  // its own row
	must.StrContains(t, b, "unhealthy")

	b = body(t, get(t, h, "/ui/plan", nil))
	must.StrContains(t, b, `data-verdict="restart-cost"`)
	must.StrContains(t, b, `data-verdict="applied"`)

	resp := get(t, h, "/ui", nil)
	must.Eq(t, http.StatusSeeOther, resp.StatusCode)
	resp = get(t, h, JobPath("default", "nope"), nil)
	must.Eq(t, http.StatusNotFound, resp.StatusCode)
	must.StrContains(t, body(t, resp), "not managed by the planner")
	req := httptest.NewRequest(http.MethodPost, "/ui/jobs", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	must.Eq(t, http.StatusMethodNotAllowed, rec.Code)
}

func TestPages_NoRoundYet(t *testing.T) {
	s, err := New(&Server{Planner: &fakePlanner{}, Progress: fakeProgress{}})
	must.NoError(t, err)
	for _, p := range []string{"/ui/cluster", "/ui/jobs", "/ui/plan"} {
		resp := get(t, s.Handler(), p, nil)
		must.Eq(t, http.StatusOK, resp.StatusCode)
	}
}

func TestGatherer_CachesPerTTL(t *testing.T) {
	s, nm := fixture(t, "")
	now := time.Now()
	s.Cluster.Now = func() time.Time { return now }
	s.Cluster.TTL = 10 * time.Second
	for range 5 {
		_ = get(t, s.Handler(), "/ui/cluster", nil)
	}
	must.Eq(t, 1, nm.calls)
	now = now.Add(11 * time.Second)
	v := s.Cluster.Cluster(context.Background())
	must.Eq(t, 2, nm.calls)
	must.SliceLen(t, 1, v.GPUs)
	g := v.GPUs[0]
	must.Eq(t, "GPU-a", g.UUID)
	must.Eq(t, 2, g.Used())
	must.Eq(t, []string{"default/" + evil}, g.Holders())
	must.Eq(t, int64(37), g.Shares[0].SMPercent)
	must.False(t, g.Shares[1].HasStats)
	runs := g.Runs()
	must.SliceLen(t, 3, runs) // held #0 #1, free #2, unhealthy #3
	must.Eq(t, "GPU-a-share-0 GPU-a-share-1", runs[0].IDs())
	must.Eq(t, "alloc-1", runs[0].AllocID)
	must.Eq(t, "", runs[1].AllocID)
}

func TestAuth(t *testing.T) {
	const token = "0123456789abcdef-token"
	s, _ := fixture(t, token)
	h := s.Handler()

	resp := get(t, h, "/ui/jobs", nil)
	must.Eq(t, http.StatusUnauthorized, resp.StatusCode)
	must.StrContains(t, body(t, resp), "Sign in")

	resp = get(t, h, "/ui/jobs", func(r *http.Request) { r.Header.Set("Authorization", "Bearer wrong") })
	must.Eq(t, http.StatusUnauthorized, resp.StatusCode)
	resp = get(t, h, "/ui/jobs", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) })
	must.Eq(t, http.StatusOK, resp.StatusCode)

	resp = get(t, h, "/ui/jobs?token=wrong", nil)
	must.Eq(t, http.StatusUnauthorized, resp.StatusCode)

	resp = get(t, h, "/ui/plan?token="+url.QueryEscape(token), nil)
	must.Eq(t, http.StatusSeeOther, resp.StatusCode)
	must.Eq(t, "/ui/plan", resp.Header.Get("Location"))
	cookies := resp.Cookies()
	must.SliceLen(t, 1, cookies)
	must.True(t, cookies[0].HttpOnly)
	must.StrNotContains(t, cookies[0].Value, token)

	resp = get(t, h, "/ui/plan", func(r *http.Request) { r.AddCookie(cookies[0]) })
	must.Eq(t, http.StatusOK, resp.StatusCode)
	resp = get(t, h, "/ui/plan", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: CookieName, Value: "forged"}) })
	must.Eq(t, http.StatusUnauthorized, resp.StatusCode)
}

func TestJobPath_RoundTrips(t *testing.T) {
	s, _ := fixture(t, "")
	p := JobPath("default", evil)
	must.False(t, strings.ContainsAny(strings.TrimPrefix(p, "/ui/jobs/default/"), "/<>\"' "))
	resp := get(t, s.Handler(), p, nil)
	must.Eq(t, http.StatusOK, resp.StatusCode)
}

// TestPages_FinishedJob: a finished job reads as finished, not "0 / 3
// workers" and "unknown" remaining, and its options say it finished, not
// that no speed was measured (it was).
func TestPages_FinishedJob(t *testing.T) {
	s, _ := fixture(t, "")
	r := s.Planner.Last()
	j := &r.Jobs[0]
	j.State, j.Running, j.Workers, j.Plan = manager.StateStopped, 0, 3, nil
	j.Fit.Finished, j.Fit.FinishedAt, j.Fit.RemainingSteps = true, time.Now().Add(-time.Minute), -1
	j.Predicted = nil
	h := s.Handler()

	b := body(t, get(t, h, "/ui/jobs", nil))
	must.StrNotContains(t, b, "0 / 3")
	must.StrNotContains(t, b, "unknown")
	must.StrContains(t, b, "finished")

	b = body(t, get(t, h, JobPath("default", evil), nil))
	must.StrNotContains(t, b, "0 / 3")
	must.StrNotContains(t, b, "no speed measured")
	must.StrContains(t, b, "Training finished at step 1000")
}

// TestOptionsNote: an empty options table names what is missing, and never
// "no speed measured" when a speed was.
func TestOptionsNote(t *testing.T) {
	measured := []model.SpeedSample{{Workers: 1, StepsPerSec: 10}, {Workers: 2, StepsPerSec: 18}, {Workers: 2, StepsPerSec: 17}}
	cases := []struct {
		name string
		fit  manager.Fit
		want string
	}{
		{"finished", manager.Fit{Finished: true, Step: 6000, SpeedSamples: measured}, "finished at step 6000"},
		{"nothing measured", manager.Fit{RemainingSteps: 100}, "no speed measured"},
		{"no remaining estimate", manager.Fit{RemainingSteps: -1, SpeedSamples: measured}, "speed measured at 1, 2 worker(s), but no remaining-steps estimate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			must.StrContains(t, optionsNote(manager.JobView{Fit: c.fit}), c.want)
		})
	}
}

// TestPages_PlanLegendNamesEveryVerdict: the Plan page's legend explains
// every verdict a candidate can get.
func TestPages_PlanLegendNamesEveryVerdict(t *testing.T) {
	s, _ := fixture(t, "")
	b := body(t, get(t, s.Handler(), "/ui/plan", nil))
	_, legend, ok := strings.Cut(b, "<h2>Verdicts</h2>")
	must.True(t, ok)
	for _, v := range manager.Verdicts {
		must.StrContains(t, legend, string(v), must.Sprintf("verdict %s", v))
	}
}

// TestCharts_WorkerAxesAreWhole: the worker-count axes (the speed chart's
// X, the workers chart's Y) tick at whole numbers only.
func TestCharts_WorkerAxesAreWhole(t *testing.T) {
	v := manager.JobView{Workers: 2, Spec: source.Spec{MaxWorkers: 2},
		Fit: manager.Fit{Batch: 1, SpeedSamples: []model.SpeedSample{{Workers: 1, StepsPerSec: 10}, {Workers: 2, StepsPerSec: 18}}}}
	xTicks := regexp.MustCompile(`text-anchor="middle" font-size="11">([^<]+)<`)
	labels := xTicks.FindAllStringSubmatch(string(speedChart(v)), -1)
	must.SliceNotEmpty(t, labels)
	for _, m := range labels {
		must.StrNotContains(t, m[1], ".", must.Sprint("a worker-count tick of the speed chart"))
	}
	now := uint64(time.Now().UnixNano())
	w := workersChart([]nomadapi.ScalingEvent{{Time: now - 60e9, Count: i64(2), PreviousCount: 1}})
	yTicks := regexp.MustCompile(`text-anchor="end" font-size="11">([^<]+)<`)
	labels = yTicks.FindAllStringSubmatch(string(w), -1)
	must.SliceNotEmpty(t, labels)
	for _, m := range labels {
		must.StrNotContains(t, m[1], ".", must.Sprint("a worker-count tick of the workers chart"))
	}
}
