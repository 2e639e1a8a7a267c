package service

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/planner/service/config"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakeconsul"
	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	must.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestAgent runs a whole planner instance against fake Nomad and Consul: it
// registers, leads, decides, writes, serves the API, reloads and stops.
func TestAgent(t *testing.T) {
	nomad := fakenomad.New()
	defer nomad.Close()
	consul := fakeconsul.New()
	defer consul.Close()
	nomad.SetNodes([]*nomadapi.NodeListStub{{ID: "n1", Name: "client1", Status: "ready", SchedulingEligibility: "eligible",
		NodeResources: &nomadapi.NodeResources{Devices: []*nomadapi.NodeDeviceResource{
			{Vendor: "caravan", Type: "gpushare", Name: "GPU-1", Instances: []*nomadapi.NodeDevice{{ID: "s0", Healthy: true}, {ID: "s1", Healthy: true}, {ID: "s2", Healthy: true}, {ID: "s3", Healthy: true}}},
			{Vendor: "caravan", Type: "gpushare", Name: "GPU-2", Instances: []*nomadapi.NodeDevice{{ID: "s4", Healthy: true}, {ID: "s5", Healthy: true}, {ID: "s6", Healthy: true}, {ID: "s7", Healthy: true}}},
			{Vendor: "caravan", Type: "gpushare", Name: "GPU-3", Instances: []*nomadapi.NodeDevice{{ID: "s8", Healthy: false}, {ID: "s9", Healthy: true}}},
		}}}})
	// Its minimum is the whole cluster, so the exploration rule (at most
	// twice the measured workers) does not hold the unmeasured job at one.
	nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_min_workers": "4", "caravan_max_workers": "4"}))
	nomad.PutJob(fakenomad.TrainingJob("other", 1, map[string]string{"caravan_planner": "false"}))

	cfg := config.Default()
	cfg.Port = 0
	cfg.Nomad.Address = nomad.URL
	cfg.Nomad.BlockingWait = 200 * time.Millisecond
	cfg.Consul.Address = strings.TrimPrefix(consul.URL, "http://")
	cfg.Consul.ServiceID = "planner-test"
	cfg.Policy.Interval = time.Hour // rounds come from kicks: leadership, reload
	cfg.Capacity.Device = "caravan/gpushare"
	cfg.DryRun = true
	must.NoError(t, cfg.Validate())

	a, err := NewAgent(cfg, hclog.NewNullLogger(), nil)
	must.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	base := "http://" + a.Addr()

	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		_, body := get(t, base+"/v1/health")
		return strings.Contains(body, `"leader": true`) && strings.Contains(body, `"nomad_synced": true`)
	}), wait.Timeout(10*time.Second), wait.Gap(20*time.Millisecond)))
	must.Eq(t, []string{"planner-test"}, consul.Services())
	_, value := consul.Holder("caravan/planner/leader")
	must.StrContains(t, value, "planner-test")

	// Dry-run: the plan is served, nothing is written.
	var plan struct {
		DryRun  bool `json:"dry_run"`
		Actions []struct {
			Job    string `json:"job"`
			To     int    `json:"to"`
			Status string `json:"status"`
		} `json:"actions"`
	}
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		code, body := get(t, base+"/v1/plan")
		if code != 200 || json.Unmarshal([]byte(body), &plan) != nil {
			return false
		}
		return len(plan.Actions) == 1
	}), wait.Timeout(10*time.Second), wait.Gap(20*time.Millisecond)))
	must.True(t, plan.DryRun)
	must.Eq(t, "default/a", plan.Actions[0].Job)
	must.Eq(t, 4, plan.Actions[0].To) // 2 healthy GPUs x 4 shares, 2 shares per worker
	must.Eq(t, "planned", plan.Actions[0].Status)
	must.SliceEmpty(t, nomad.WritesSnapshot())

	code, body := get(t, base+"/v1/jobs")
	must.Eq(t, 200, code)
	must.StrContains(t, body, `"id": "a"`)
	must.StrNotContains(t, body, `"id": "other"`)
	code, _ = get(t, base+"/v1/jobs/default/a")
	must.Eq(t, 200, code)
	code, body = get(t, base+"/v1/jobs/default/other")
	must.Eq(t, 404, code)
	must.StrContains(t, body, "not managed")
	code, _ = get(t, base+"/v1/nope")
	must.Eq(t, 404, code)
	resp, err := http.Post(base+"/v1/plan", "application/json", nil)
	must.NoError(t, err)
	resp.Body.Close()
	must.Eq(t, 405, resp.StatusCode)
	resp, err = http.Post(base+"/v1/progress", "application/json", strings.NewReader(`{}`))
	must.NoError(t, err)
	resp.Body.Close()
	must.Eq(t, 401, resp.StatusCode)
	code, body = get(t, base+"/v1/metrics")
	must.Eq(t, 200, code)
	must.StrContains(t, body, "caravan_planner_leader 1")
	must.StrContains(t, body, `caravan_planner_progress_reports_total{code="401"} 1`)
	must.StrContains(t, body, `caravan_planner_job_workers{namespace="default",nomad_job="a"} 1`)

	// SIGHUP-style reload: dry-run off; the reload kicks a round that writes.
	next := *cfg
	next.DryRun = false
	a.Reload(&next)
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool { return len(nomad.WritesSnapshot()) == 1 }),
		wait.Timeout(10*time.Second), wait.Gap(20*time.Millisecond)))
	must.Eq(t, "scale default/a worker 4", nomad.WritesSnapshot()[0])

	// Clean stop: lock released, service deregistered.
	cancel()
	must.NoError(t, <-done)
	holder, _ := consul.Holder("caravan/planner/leader")
	must.Eq(t, "", holder)
	must.SliceEmpty(t, consul.Services())
}

// A stopped (or stopping) allocation's token is refused even while a
// verified answer for it is cached; unverified claims (Nomad without ACLs)
// must name a live allocation the planner knows.
func TestAllocMayReport(t *testing.T) {
	allocs := []*nomadapi.AllocationListStub{
		{ID: "run", ClientStatus: "running", DesiredStatus: "run"},
		{ID: "done", ClientStatus: "complete", DesiredStatus: "run"},
		{ID: "stopping", ClientStatus: "running", DesiredStatus: "stop"},
	}
	for _, tc := range []struct {
		alloc      string
		unverified bool
		ok         bool
	}{
		{"run", false, true},
		{"run", true, true},
		{"done", false, false},
		{"stopping", false, false},
		{"unknown", false, true}, // Nomad vouched for it; the snapshot may lag
		{"unknown", true, false},
	} {
		err := allocMayReport(allocs, ingest.Identity{Namespace: "default", JobID: "j", AllocationID: tc.alloc, Unverified: tc.unverified})
		if tc.ok {
			must.NoError(t, err, must.Sprintf("%+v", tc))
		} else {
			must.ErrorIs(t, err, ingest.ErrForbidden, must.Sprintf("%+v", tc))
		}
	}
}
