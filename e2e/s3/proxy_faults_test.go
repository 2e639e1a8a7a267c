package s3

import (
	"strconv"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
	"github.com/caravan-nomad/caravan/internal/s3fault"
)

// The tests in this file run on the cluster's own clients, whose store
// reaches the real SeaweedFS through the cluster's fault proxy
// (CARAVAN_S3_FAULT_PROXY=1, harness.S3Faults): each sets a fault while a
// commit runs and clears it after.

// killTimeout is the trainer jobspec's kill_timeout, which bounds the
// checkpoint on stop.
const killTimeout = 30 * time.Second

// trainOnClient1 runs the trainer (a service job) on client1 of the
// cluster with the fault proxy, and returns the cluster, the proxy, the
// uninterrupted run's hash and the running allocation. The trainer's seed
// is new for each run: its checkpoints' chunks are then new too, and a
// commit uploads them (it skips those already in the bucket, which an
// earlier run at the same step of the same seed would have left).
func trainOnClient1(t *testing.T, vars ...string) (*harness.C, *harness.S3Faults, string, *nomadapi.AllocationListStub) {
	t.Helper()
	c, _ := s3Cluster(t)
	f := c.S3Faults(t)
	seed := strconv.FormatInt(2+time.Now().UnixNano()%1_000_000_000, 10)
	want := harness.TrainerReference(t, c.Bin, steps, "-seed", seed)
	c.Eligible(t, "client2", false)
	runTrainer(t, c, append([]string{"job_type=service", "hold=true", `trainer_args=["-seed", "` + seed + `"]`}, vars...)...)
	return c, f, want, c.WaitRunning(t, trainJob, trainTask, nil)
}

// TestS3_SlowDownDuringStopCommit has the server answer 503 SlowDown to
// four writes in a row during the commit of a migration's stop checkpoint: the commit retries, succeeds within kill_timeout and says so
// in its event, and the replacement on the other client restores that
// generation; the run ends bit for bit.
func TestS3_SlowDownDuringStopCommit(t *testing.T) {
	c, f, want, a1 := trainOnClient1(t)

	c.Eligible(t, "client2", true)
	c.Eligible(t, "client1", false)
	// The next four writes below keys/ are answered SlowDown: the commit's
	// first write, its key lock, tried again and again. Only a commit
	// writes there, and the stop's is the only one under way (the
	// replacement's restore only reads). The store retries a throttled
	// request until the stop's deadline, backing off (jittered, from 1s,
	// doubling up to 5s): four tries cost at most about 7s of the 27s a
	// stop's commit may take.
	before := f.Stats().Injected["slow_down"]
	f.Set(s3fault.Spec{Kind: "slow_down", Method: "PUT", PathContains: "/keys/", Times: 4})
	stopAt := time.Now()
	_, err := c.CLI(t, "alloc", "stop", "-detach", a1.ID)
	must.NoError(t, err)

	saved := c.WaitDriverEvent(t, a1.ID, trainTask, "Checkpoint saved (stop)")
	savedAt := time.Unix(0, saved.Time)
	slowed := f.Stats().Injected["slow_down"] - before
	t.Logf("%d writes answered SlowDown; the stop's commit was saved %s after the stop: %s",
		slowed, savedAt.Sub(stopAt).Round(time.Millisecond), saved.DriverMessage)
	must.Eq(t, 4, slowed, must.Sprint("the commit was saved before the server answered SlowDown four times"))
	must.Less(t, killTimeout, savedAt.Sub(stopAt), must.Sprint("the commit did not finish within kill_timeout"))
	must.Nil(t, c.DriverEvent(t, a1.ID, trainTask, "Checkpoint failed"))

	a2 := c.WaitRunning(t, trainJob, trainTask, map[string]bool{a1.ID: true})
	must.Eq(t, "client2", c.NodeName(t, a2.NodeID))
	restored := c.WaitDriverEvent(t, a2.ID, trainTask, "Checkpoint restored")
	must.Eq(t, saved.Details["generation"], restored.Details["generation"])
	must.Eq(t, "client1", restored.Details["node"])
	c.WaitTrainerFinal(t, a2.ID, steps, want, true)
}

// TestS3_ResetMidUpload resets the connection in the middle of every
// upload of a chunk, then of the manifest, while a migration's stop
// checkpoint commits: each time the stop stays bounded by kill_timeout,
// the event says the checkpoint failed, why, and which generation is kept,
// and the replacement on the other client restores that generation; then
// the next commit works, and the run ends bit for bit.
func TestS3_ResetMidUpload(t *testing.T) {
	c, f, want, alloc := trainOnClient1(t)
	signal(t, c, alloc.ID)
	kept := c.WaitDriverEvent(t, alloc.ID, trainTask, "Checkpoint saved (on demand)")
	seen := map[string]bool{}

	for _, tc := range []struct {
		upload, path, step string
	}{
		{"a chunk", "/chunks/", "upload chunk"},
		{"the manifest", "/gen-", "publish manifest"},
	} {
		t.Logf("reset in the middle of every upload of %s", tc.upload)
		from, to := c.NodeName(t, alloc.NodeID), "client1"
		if from == "client1" {
			to = "client2"
		}
		c.Eligible(t, to, true)
		c.Eligible(t, from, false)
		// 16 bytes of the body pass, then the connection is reset.
		f.Set(s3fault.Spec{Kind: "reset_body", Method: "PUT", PathContains: tc.path, ResetAfter: 16})
		before := f.Stats().Injected["reset_body"]
		stopAt := time.Now()
		_, err := c.CLI(t, "alloc", "stop", "-detach", alloc.ID)
		must.NoError(t, err)

		failed := c.WaitDriverEvent(t, alloc.ID, trainTask, "Checkpoint failed (stop)")
		c.WaitTerminal(t, alloc.ID, 2*time.Minute)
		took := time.Since(stopAt)
		resets := f.Stats().Injected["reset_body"] - before
		f.Clear()
		t.Logf("%s: %d uploads reset; stopped in %s; event: %s", tc.upload, resets, took.Round(time.Millisecond),
			failed.DriverMessage)
		must.Positive(t, resets)
		// kill_timeout, plus the agent's own steps around the stop.
		must.Less(t, 2*killTimeout, took, must.Sprint("the stop was not bounded by kill_timeout"))
		must.StrContains(t, failed.DriverMessage, "generation "+kept.Details["generation"]+" kept")
		// Why: the step that failed, and the reset.
		must.StrContains(t, failed.DriverMessage, tc.step)
		must.StrContains(t, failed.DriverMessage, "connection reset by peer")
		must.Nil(t, c.DriverEvent(t, alloc.ID, trainTask, "Checkpoint saved (stop)"))

		seen[alloc.ID] = true
		alloc = c.WaitRunning(t, trainJob, trainTask, seen)
		must.Eq(t, to, c.NodeName(t, alloc.NodeID))
		restored := c.WaitDriverEvent(t, alloc.ID, trainTask, "Checkpoint restored")
		must.Eq(t, kept.Details["generation"], restored.Details["generation"])
		must.StrContains(t, c.Logs(t, alloc.ID, trainTask, "stdout"), "resumed step="+kept.Details["step"])
	}

	// The faults are gone: the next commit works.
	signal(t, c, alloc.ID)
	next := c.WaitDriverEvent(t, alloc.ID, trainTask, "Checkpoint saved (on demand)")
	must.Greater(t, mustInt(t, kept.Details["generation"]), mustInt(t, next.Details["generation"]))
	c.WaitTrainerFinal(t, alloc.ID, steps, want, true)
}
