package httpapi

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/service/manager"
	"github.com/caravan-nomad/caravan/planner/service/source"
)

type rounds struct{ last *manager.Round }

func (r rounds) Last() *manager.Round { return r.last }
func (r rounds) MetricsSnapshot() manager.Metrics {
	return manager.Metrics{Applied: map[manager.Kind]uint64{manager.KindScale: 2}}
}

type follower struct{}

func (follower) IsLeader() bool { return false }

type snap struct{}

func (snap) Snapshot() source.Snapshot { return source.Snapshot{Synced: true} }

func TestServer(t *testing.T) {
	s := &Server{ID: "p", Rounds: rounds{}, Leader: follower{}, Source: snap{},
		Progress: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) })}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	do := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(""))
		resp, err := http.DefaultClient.Do(req)
		must.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		must.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	cases := []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/v1/health", 200, `"leader": false`},
		{"GET", "/v1/plan", 503, "no decision round yet"},
		{"GET", "/v1/gpus", 503, "no decision round with a packing view yet"},
		{"GET", "/v1/jobs", 200, `"jobs": []`},
		{"GET", "/v1/jobs/default", 400, "want /v1/jobs/<namespace>/<job id>"},
		{"GET", "/v1/jobs/default/x", 404, "not managed"},
		{"DELETE", "/v1/jobs", 405, "use GET"},
		{"GET", "/v2/anything", 404, "no such endpoint"},
		{"POST", "/v1/progress", 401, ""},
		{"GET", "/v1/metrics", 200, `caravan_planner_actions_applied_total{kind="scale"} 2`},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			code, body := do(tc.method, tc.path)
			must.Eq(t, tc.code, code)
			must.StrContains(t, body, tc.body)
			if code >= 400 && tc.path != "/v1/progress" {
				var e errorBody
				must.NoError(t, json.Unmarshal([]byte(body), &e))
				must.NotEq(t, "", e.Error)
			}
		})
	}
	_, metrics := do("GET", "/v1/metrics")
	must.StrContains(t, metrics, `caravan_planner_progress_reports_total{code="401"} 1`)
	must.StrContains(t, metrics, "caravan_planner_leader 0")

	s.SetStopping()
	code, body := do("GET", "/v1/health")
	must.Eq(t, 503, code)
	must.StrContains(t, body, "stopping")
}

// One job's view holding a NaN (a model that went wrong) must not make
// /v1/jobs or /v1/plan fail for every job: that job shows a render_error.
func TestServer_OneUnrenderableJobDoesNotFailTheOthers(t *testing.T) {
	bad := manager.JobView{Namespace: "default", ID: "bad", State: manager.StateRunning}
	bad.Fit.Loss = math.NaN()
	good := manager.JobView{Namespace: "default", ID: "good", State: manager.StateRunning}
	good.Fit.Loss = 0.5
	round := &manager.Round{Jobs: []manager.JobView{bad, good}, Actions: []manager.Action{{Job: "default/bad", Gain: math.Inf(1)}},
		Plan: &policy.Plan{Jobs: []policy.JobPlan{{ID: "default/bad", PredictedRemaining: math.NaN()}}}}
	s := &Server{ID: "p", Rounds: rounds{last: round}, Leader: follower{}, Source: snap{}}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	get := func(path string, v any) {
		resp, err := http.Get(srv.URL + path)
		must.NoError(t, err)
		defer resp.Body.Close()
		must.Eq(t, 200, resp.StatusCode)
		must.NoError(t, json.NewDecoder(resp.Body).Decode(v))
	}
	var jobs struct {
		Jobs []map[string]any `json:"jobs"`
	}
	get("/v1/jobs", &jobs)
	must.SliceLen(t, 2, jobs.Jobs)
	must.Eq(t, "bad", jobs.Jobs[0]["id"])
	must.StrContains(t, jobs.Jobs[0]["render_error"].(string), "NaN")
	must.Eq(t, 0.5, jobs.Jobs[1]["model"].(map[string]any)["loss"])

	var plan map[string]any
	get("/v1/plan", &plan)
	must.SliceLen(t, 2, plan["jobs"].([]any))
	must.StrContains(t, plan["plan"].(map[string]any)["error"].(string), "cannot be rendered")
	must.StrContains(t, plan["actions"].([]any)[0].(map[string]any)["error"].(string), "cannot be rendered")

	var one map[string]any
	get("/v1/jobs/default/bad", &one)
	must.StrContains(t, one["render_error"].(string), "cannot be rendered")
}
