package s3

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/internal/s3fault"
)

// slowDownFor is how long the server throttles in
// TestS3_StopCheckpointSurvivesSlowDown, and longKillTimeout the stop's
// budget there (the cluster's clients raise max_kill_timeout to 60s,
// scripts/cluster/client.hcl).
const (
	slowDownFor     = 30 * time.Second
	longKillTimeout = 45 * time.Second
)

// TestS3_StopCheckpointSurvivesSlowDown (issue 29, item 5): the server
// answers every request 503 SlowDown for 30 s from the moment a migration
// stops the trainer, whose kill_timeout is 45 s: the checkpoint taken at
// stop retries through the throttling (the stop deadline is its budget, no
// fixed number of attempts), is committed after the throttling ends and
// within kill_timeout, and the replacement on the other client restores
// it; the run ends bit for bit. Before, the commit gave up after 7 to 9 s
// of SlowDown (10 attempts; a HEAD's bodiless 503 was not taken for
// throttling).
func TestS3_StopCheckpointSurvivesSlowDown(t *testing.T) {
	c, f, want, a1 := trainOnClient1(t, "kill_timeout="+longKillTimeout.String())
	signal(t, c, a1.ID)
	first := c.WaitDriverEvent(t, a1.ID, trainTask, "Checkpoint saved (on demand)")

	c.Eligible(t, "client2", true)
	c.Eligible(t, "client1", false)
	before := f.Stats().Injected["slow_down"]
	f.Set(s3fault.Spec{Kind: "slow_down"})
	stopAt := time.Now()
	// Lifted from another goroutine: S3Faults.Clear may not fail the test
	// there.
	lift := time.AfterFunc(slowDownFor, func() { _ = s3fault.Client{URL: f.ControlURL}.Clear() })
	t.Cleanup(func() { lift.Stop(); f.Clear() })
	_, err := c.CLI(t, "alloc", "stop", "-detach", a1.ID)
	must.NoError(t, err)

	saved := c.WaitDriverEvent(t, a1.ID, trainTask, "Checkpoint saved (stop)")
	took := time.Unix(0, saved.Time).Sub(stopAt)
	slowed := f.Stats().Injected["slow_down"] - before
	t.Logf("%d requests answered SlowDown; the stop's checkpoint was saved %s after the stop: %s",
		slowed, took.Round(time.Millisecond), saved.DriverMessage)
	must.Greater(t, slowDownFor, took, must.Sprint("saved before the throttling ended: did the proxy throttle it?"))
	must.Less(t, longKillTimeout, took, must.Sprint("the commit did not finish within kill_timeout"))
	must.Positive(t, slowed)
	must.Nil(t, c.DriverEvent(t, a1.ID, trainTask, "Checkpoint failed"))
	must.Greater(t, mustInt(t, first.Details["generation"]), mustInt(t, saved.Details["generation"]))

	a2 := c.WaitRunning(t, trainJob, trainTask, map[string]bool{a1.ID: true})
	must.Eq(t, "client2", c.NodeName(t, a2.NodeID))
	restored := c.WaitDriverEvent(t, a2.ID, trainTask, "Checkpoint restored")
	must.Eq(t, saved.Details["generation"], restored.Details["generation"])
	must.StrContains(t, c.Logs(t, a2.ID, trainTask, "stdout"), "resumed step="+saved.Details["step"])
	c.WaitTrainerFinal(t, a2.ID, steps, want, true)
}
