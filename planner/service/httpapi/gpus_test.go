package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/manager"
)

// TestServer_GPUs: /v1/gpus serves the last round's packing view: who
// shares each GPU, the measured combined gain and the last decision.
func TestServer_GPUs(t *testing.T) {
	gain, solo, packed := 0.91, 100.0, 45.0
	round := &manager.Round{Packing: &manager.PackingView{Enabled: true, UnpackBelow: 1, MinRatio: 0.7, GPUs: []manager.GPUView{{
		ID: "GPU-0", Node: "client1", Shares: 4, Used: 4, Gain: &gain,
		Jobs: []manager.GPUJob{{Job: "default/a", Shares: 2, Solo: &solo, Packed: &packed}, {Job: "default/b", Shares: 2}},
		Last: &manager.PackDecision{Kind: "migrate", Job: "default/b", Reason: "unpack default/b from GPU GPU-0", Status: manager.PackApplied},
	}}}}
	s := &Server{ID: "p", Rounds: rounds{last: round}, Leader: follower{}, Source: snap{}}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/gpus")
	must.NoError(t, err)
	defer resp.Body.Close()
	must.Eq(t, 200, resp.StatusCode)
	var body struct {
		Packing struct {
			Enabled bool `json:"enabled"`
			GPUs    []struct {
				ID   string  `json:"id"`
				Gain float64 `json:"measured_gain"`
				Jobs []struct {
					Job  string   `json:"job"`
					Solo *float64 `json:"solo_samples_per_sec"`
				} `json:"jobs"`
				Last struct {
					Job    string `json:"job"`
					Status string `json:"status"`
				} `json:"last_decision"`
			} `json:"gpus"`
		} `json:"packing"`
	}
	must.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	must.True(t, body.Packing.Enabled)
	must.SliceLen(t, 1, body.Packing.GPUs)
	g := body.Packing.GPUs[0]
	must.Eq(t, "GPU-0", g.ID)
	must.Eq(t, 0.91, g.Gain)
	must.SliceLen(t, 2, g.Jobs)
	must.Eq(t, 100.0, *g.Jobs[0].Solo)
	must.Nil(t, g.Jobs[1].Solo)
	must.Eq(t, "default/b", g.Last.Job)
	must.Eq(t, manager.PackApplied, g.Last.Status)
}
