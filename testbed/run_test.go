package testbed

import (
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/internal/jobtime/jobtimetest"
)

// TestReadSubmitTimes_SurvivesMoreScalesThanNomadKeeps: a job the planner
// scaled 8 times (version 0 gone from Nomad) is counted from its first
// submission as Nomad recorded it, not from a later time.
func TestReadSubmitTimes_SurvivesMoreScalesThanNomadKeeps(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	srv := jobtimetest.Serve(t, jobtimetest.Scenario{JobID: "tb-a", Submit: t0, QueueFor: 20 * time.Second,
		Scales: 8, ScaleEvery: 10 * time.Second, Finish: t0.Add(150 * time.Second)})
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: srv.URL})
	must.NoError(t, err)
	r := &runner{nomad: c, jobs: []Job{{Name: "tb-a"}}, submitted: 1,
		recs: map[string]*JobRecord{"tb-a": {Name: "tb-a", Submitted: t0.Add(5 * time.Second)}}}
	must.NoError(t, r.readSubmitTimes())
	must.Eq(t, t0, r.recs["tb-a"].Submitted.UTC())
}
