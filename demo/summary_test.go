package demo

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/internal/jobtime/jobtimetest"
)

func TestSummary_PrintsThePlannerPage(t *testing.T) {
	var b strings.Builder
	d := &Demo{cfg: Config{NomadAddr: "http://127.0.0.1:4646", ConsulAddr: "127.0.0.1:8500"}, out: &b, start: time.Now()}
	d.summary(&Result{Planner: PlannerResult{Instance: "127.0.0.1:23456"}})
	must.StrContains(t, b.String(), "Planner:   http://127.0.0.1:23456/ui")

	b.Reset()
	d.summary(&Result{})
	must.StrNotContains(t, b.String(), "Planner:")
}

// TestSummary_TeardownPrintsNoAddresses: with DEMO_TEARDOWN=1 the cluster
// is gone when the summary is read, so it names no address.
func TestSummary_TeardownPrintsNoAddresses(t *testing.T) {
	var b strings.Builder
	d := &Demo{cfg: Config{NomadAddr: "http://127.0.0.1:4646", ConsulAddr: "127.0.0.1:8500", Teardown: true}, out: &b, start: time.Now()}
	d.summary(&Result{Planner: PlannerResult{Instance: "127.0.0.1:23456"}})
	for _, addr := range []string{"127.0.0.1:4646", "127.0.0.1:8500", "127.0.0.1:23456", "UI:"} {
		must.StrNotContains(t, b.String(), addr)
	}
	must.StrContains(t, b.String(), "DEMO_TEARDOWN=1")
}

// TestJCT_SurvivesMoreScalesThanNomadKeeps: an elastic job scaled 8 times
// (Nomad keeps 6 versions, and its SubmitTime moves to the newest) that
// ran 110 s shows a JCT of 110 s, not the time since its last scale.
func TestJCT_SurvivesMoreScalesThanNomadKeeps(t *testing.T) {
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	srv := jobtimetest.Serve(t, jobtimetest.Scenario{JobID: "elastic-b", Submit: t0, Scales: 8,
		ScaleEvery: 12 * time.Second, Finish: t0.Add(110 * time.Second)})
	d, err := New(Config{NomadAddr: srv.URL, ConsulAddr: "127.0.0.1:1"}, io.Discard)
	must.NoError(t, err)
	jct, err := d.jct("elastic-b")
	must.NoError(t, err)
	must.Eq(t, 110*time.Second, jct)
}

// TestSummary_ContainerJob: the container job gets its row and its bit for
// bit line, and its checkpoints count with the others.
func TestSummary_ContainerJob(t *testing.T) {
	var b strings.Builder
	d := &Demo{cfg: Config{Teardown: true}, out: &b, start: time.Now()}
	d.summary(&Result{Container: ContainerResult{Allocs: []string{"a", "b"}, SuspendedAt: 1200, ResumedAt: 1200,
		FinalStep: 6000, Saved: "Checkpoint saved (exit)", Restored: "Checkpoint restored", Identical: true}})
	out := b.String()
	must.StrContains(t, out, "client1 (docker)  suspended at step 1200, resumed at 1200, finished at 6000")
	must.StrContains(t, out, "train-container")
	must.StrContains(t, out, "container job's final parameters identical to an uninterrupted run: true")
	must.StrContains(t, out, "checkpoints saved:    1")
	must.StrContains(t, out, "checkpoints restored: 1")

	b.Reset()
	d.summary(&Result{})
	must.StrNotContains(t, b.String(), "container job")
}
