package s3

import (
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// TestS3_SuspendResumeMigrateDrain suspends the trainer (scale 0), resumes
// it (scale 1), migrates it client1 -> client2 (alloc stop, client1
// ineligible) and drains client2 (back to client1), with every checkpoint
// going through the S3 server and no directory shared by the clients, and
// checks the final parameters equal an uninterrupted run's, bit for bit.
func TestS3_SuspendResumeMigrateDrain(t *testing.T) {
	c, s := s3Cluster(t)
	want := harness.TrainerReference(t, c.Bin, steps)

	c.Eligible(t, "client2", false) // start on client1
	// A service job: Nomad does not replace drained batch allocations.
	runTrainer(t, c, "job_type=service", "hold=true")
	a1 := c.WaitRunning(t, trainJob, trainTask, nil)
	must.Eq(t, "client1", c.NodeName(t, a1.NodeID))

	// Suspend: scale to 0; the driver commits to S3 on stop.
	_, err := c.CLI(t, "job", "scale", trainJob, "train", "0")
	must.NoError(t, err)
	saved := c.WaitDriverEvent(t, a1.ID, trainTask, "Checkpoint saved (stop)")
	c.WaitTerminal(t, a1.ID, 3*time.Minute)
	must.SliceNotEmpty(t, bucketKeys(t, s, s.Prefix+"/"), must.Sprint("nothing under the clients' prefix"))
	noSharedDirectory(t, c, s)

	// Resume: scale back to 1; the new allocation restores from S3.
	_, err = c.CLI(t, "job", "scale", trainJob, "train", "1")
	must.NoError(t, err)
	a2 := c.WaitRunning(t, trainJob, trainTask, map[string]bool{a1.ID: true})
	restored := c.WaitDriverEvent(t, a2.ID, trainTask, "Checkpoint restored")
	must.Eq(t, "client1", restored.Details["node"])
	must.Eq(t, saved.Details["generation"], restored.Details["generation"])
	must.StrContains(t, c.Logs(t, a2.ID, trainTask, "stdout"), "resumed step="+saved.Details["step"])
	t.Logf("suspend: commit %s (%s bytes); resume: restore %s", saved.Details["duration"], saved.Details["bytes"],
		restored.Details["duration"])

	// Migrate client1 -> client2: client2 reads what client1 wrote, through
	// S3 only.
	c.Eligible(t, "client2", true)
	c.Eligible(t, "client1", false)
	_, err = c.CLI(t, "alloc", "stop", "-detach", a2.ID)
	must.NoError(t, err)
	c.WaitDriverEvent(t, a2.ID, trainTask, "Checkpoint saved (stop)")
	a3 := c.WaitRunning(t, trainJob, trainTask, map[string]bool{a1.ID: true, a2.ID: true})
	must.Eq(t, "client2", c.NodeName(t, a3.NodeID))
	must.Eq(t, "client1", c.WaitDriverEvent(t, a3.ID, trainTask, "Checkpoint restored").Details["node"])

	// Drain client2: the allocation moves back to client1.
	c.Eligible(t, "client1", true)
	_, err = c.Nomad.Nodes().UpdateDrain(c.Client(t, "client2").NodeID, &nomadapi.DrainSpec{Deadline: 3 * time.Second}, false, nil)
	must.NoError(t, err)
	c.WaitDriverEvent(t, a3.ID, trainTask, "Checkpoint saved (stop)")
	a4 := c.WaitRunning(t, trainJob, trainTask, map[string]bool{a1.ID: true, a2.ID: true, a3.ID: true})
	must.Eq(t, "client1", c.NodeName(t, a4.NodeID))
	must.Eq(t, "client2", c.WaitDriverEvent(t, a4.ID, trainTask, "Checkpoint restored").Details["node"])

	c.WaitTrainerFinal(t, a4.ID, steps, want, true)
	noSharedDirectory(t, c, s)
}
