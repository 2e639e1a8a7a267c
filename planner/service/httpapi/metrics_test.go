package httpapi

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/service/manager"
)

type metricRounds struct{ m manager.Metrics }

func (r metricRounds) Last() *manager.Round {
	return &manager.Round{
		Plan: &policy.Plan{CapacityGPUMilli: 4000, UsedGPUMilli: 1500},
		Jobs: []manager.JobView{
			{Namespace: "default", ID: "measured", State: manager.StateRunning, Workers: 3,
				Fit: manager.Fit{Step: 100, Loss: 0.5, StepsPerSec: 12, RemainingSteps: 900}},
			{Namespace: "default", ID: "fresh", State: manager.StateQueued,
				Fit: manager.Fit{RemainingSteps: -1, StepsPerSec: math.NaN()}},
		},
	}
}
func (r metricRounds) MetricsSnapshot() manager.Metrics { return r.m }

// scrape fetches /v1/metrics and parses it with Prometheus's own parser.
func scrape(t *testing.T, s *Server) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/metrics", nil))
	must.Eq(t, 200, rec.Code)
	body := rec.Body.String()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	must.NoError(t, err)
	return fams, body
}

func TestMetricsFollowPrometheusConventions(t *testing.T) {
	m := manager.Metrics{Rounds: 3, Applied: map[manager.Kind]uint64{manager.KindScale: 2},
		RoundSeconds: manager.Histogram{Bounds: manager.RoundBuckets}}
	for _, d := range []float64{0.002, 0.02, 3} {
		m.RoundSeconds.Observe(d)
	}
	s := &Server{ID: "p", Rounds: metricRounds{m}, Leader: follower{}, Source: snap{}}
	fams, body := scrape(t, s)

	types := map[string]dto.MetricType{
		"caravan_planner_round_duration_seconds": dto.MetricType_HISTOGRAM,
		"caravan_planner_rounds_total":           dto.MetricType_COUNTER,
		"caravan_planner_actions_applied_total":  dto.MetricType_COUNTER,
		"caravan_planner_job_workers":            dto.MetricType_GAUGE,
		"caravan_planner_capacity_gpus":          dto.MetricType_GAUGE,
		"caravan_build_info":                     dto.MetricType_GAUGE,
		"go_goroutines":                          dto.MetricType_GAUGE,
		"process_start_time_seconds":             dto.MetricType_GAUGE,
	}
	for name, typ := range types {
		f, ok := fams[name]
		must.True(t, ok, must.Sprintf("missing %s", name))
		must.Eq(t, typ, f.GetType(), must.Sprint(name))
	}
	h := fams["caravan_planner_round_duration_seconds"].Metric[0].GetHistogram()
	must.Eq(t, uint64(3), h.GetSampleCount())
	cum := map[float64]uint64{}
	for _, b := range h.Bucket {
		cum[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	must.Eq(t, uint64(1), cum[0.0025])
	must.Eq(t, uint64(2), cum[2.5])
	must.Eq(t, uint64(3), cum[5])

	must.Eq(t, 4.0, fams["caravan_planner_capacity_gpus"].Metric[0].GetGauge().GetValue())
	must.Eq(t, 1.5, fams["caravan_planner_planned_gpus"].Metric[0].GetGauge().GetValue())
	info := fams["caravan_build_info"].Metric[0]
	names := []string{}
	for _, l := range info.Label {
		names = append(names, l.GetName())
	}
	must.Eq(t, []string{"goversion", "revision", "version"}, names)

	// No target-label collisions, no milli units, no -1 for unknown.
	for name, f := range fams {
		must.StrNotContains(t, name, "milli")
		for _, mt := range f.Metric {
			for _, l := range mt.Label {
				must.NotEq(t, "job", l.GetName(), must.Sprint(name))
				must.NotEq(t, "instance", l.GetName(), must.Sprint(name))
			}
		}
	}
	must.StrNotContains(t, body, " -1\n")
	must.StrContains(t, body, `caravan_planner_job_remaining_steps{namespace="default",nomad_job="measured"} 900`)
	must.StrNotContains(t, body, `caravan_planner_job_remaining_steps{namespace="default",nomad_job="fresh"}`)
	must.StrNotContains(t, body, `caravan_planner_job_steps_per_second{namespace="default",nomad_job="fresh"}`)

	problems, err := promlint.New(strings.NewReader(body)).Lint()
	must.NoError(t, err)
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "caravan_") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
}
