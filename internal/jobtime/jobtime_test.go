package jobtime_test

import (
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/internal/jobtime"
	"github.com/caravan-nomad/caravan/internal/jobtime/jobtimetest"
)

// TestRecord_JCTSurvivesScales: however often a job was scaled (8 scales,
// more than the 6 versions Nomad keeps, so version 0 is gone and the job's
// SubmitTime is the last scale's), its JCT runs from its first submission
// to its last task's end.
func TestRecord_JCTSurvivesScales(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		s     jobtimetest.Scenario
		start time.Time
	}{
		{"no scale", jobtimetest.Scenario{Scales: 0}, t0},
		{"five scales, version 0 kept", jobtimetest.Scenario{Scales: 5}, t0},
		{"eight scales, version 0 gone", jobtimetest.Scenario{Scales: 8}, t0},
		{"queued first, twenty scales", jobtimetest.Scenario{Scales: 20, QueueFor: 30 * time.Second}, t0},
		{"an earlier incarnation's allocation", jobtimetest.Scenario{Scales: 8, StaleAlloc: true}, t0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			s.JobID, s.Submit, s.ScaleEvery = "elastic-b", t0, 10*time.Second
			s.Finish = t0.Add(110 * time.Second)
			srv := jobtimetest.Serve(t, s)
			c, err := nomadapi.NewClient(&nomadapi.Config{Address: srv.URL})
			must.NoError(t, err)
			rec, err := jobtime.Read(c, s.JobID, nil)
			must.NoError(t, err)
			must.Eq(t, tc.start, rec.Submitted().UTC())
			must.Eq(t, s.Finish, rec.Finished().UTC())
			must.Eq(t, 110*time.Second, rec.JCT())
		})
	}
}

func TestRecord_UnknownTimes(t *testing.T) {
	must.True(t, jobtime.Record{}.Submitted().IsZero())
	must.True(t, jobtime.Record{}.Finished().IsZero())
	must.Eq(t, 0, jobtime.Record{}.JCT())
}
