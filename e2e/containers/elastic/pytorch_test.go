package elastic_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// TestContainers_PyTorchElastic runs the elastic PyTorch job as containers
// of the image built from Debian's python3-torch, under Nomad's docker
// driver (jobspecs/train-pytorch-elastic.nomad.hcl, driver=docker) against dockerd
// (client1) and against podman (client2), on one client,
// through 1 -> 2 -> 1 workers, a suspend (scale 0: the launcher commits the
// workers' live snapshot on SIGTERM, the poststop task commits it to the
// store) and a resume as 2 workers (both prestart tasks restore it, index
// 1's although it holds an older checkpoint of its own), then 2 -> 1 to the
// end, next to the host job run uninterrupted. Every membership change continues from the step
// the group stopped at, the resume from the suspend's checkpoint, and the
// final evaluation loss matches the host run's within the host path's own
// tolerance (harness.PyTorchLossTolerance: a changing world size changes
// the order of float sums, so neither path is bit for bit).
func TestContainers_PyTorchElastic(t *testing.T) {
	c := harness.Cluster(t)
	harness.RequireTorch(t)
	c.LoadImages(t)
	const ref = "ctr-pte-host"
	c.StopJob(t, ref)
	c.RunJob(t, harness.PyTorchHostJobspec, c.PyTorchHostVars(ref)...)
	for _, d := range harness.ContainerRuntimes {
		t.Run(d.Name, func(t *testing.T) { pytorchElastic(t, c, ref, d.Name, d.Client) })
	}
}

// pytorchElastic runs TestContainers_PyTorchElastic's scenario under the
// runtime on its client, against the host job ref.
func pytorchElastic(t *testing.T, c *harness.C, ref, runtime, client string) {
	c.RequireRuntime(t, client, runtime)
	job := "ctr-pte-" + runtime
	c.StopJob(t, job)
	c.RunJob(t, "jobspecs/train-pytorch-elastic.nomad.hcl", "driver=docker", "name="+job, "nodes="+client,
		"steps="+strconv.Itoa(harness.PyTorchSteps), harness.PyTorchPace)
	j := c.PyTorch(t, job)

	// 1 -> 2: the first worker leaves at an agreed step with a live snapshot;
	// both ranks of the new group start from that step.
	first := j.RunningWorkers(1)[0]
	c.WaitDriverEvent(t, first.ID, "restore", "No checkpoint under")
	up, two := j.GrowToTwo(first, 500)

	// 2 -> 1: the stopped container commits its live snapshot on SIGTERM
	// (every rank holds the whole model), the other continues alone.
	j.Scale(1)
	stopped, kept := j.StoppedAndKept(two)
	snap2, down := j.Regroup(kept.ID, 2, 1, up)
	must.Eq(t, snap2, down, must.Sprint("the group of 1 did not start from the step the group of 2 stopped at"))
	ev := c.WaitDriverEvent(t, stopped.ID, "commit", "Checkpoint saved (exit)")
	must.Eq(t, strconv.Itoa(snap2), ev.Details["step"],
		must.Sprint("the stopped worker's checkpoint is not the step the group stopped at"))
	j.WaitStepWorkers([]*nomadapi.AllocationListStub{kept}, down+1, 1)

	// Suspend: the last worker commits on its kill signal; resume restores it.
	j.Scale(0)
	saved := c.WaitDriverEvent(t, kept.ID, "commit", "Checkpoint saved (exit)")
	c.WaitAllocStatus(t, kept.ID, nomadapi.AllocClientStatusComplete, 3*time.Minute)
	savedStep, err := strconv.Atoi(saved.Details["step"])
	must.NoError(t, err)
	must.Between(t, down+1, savedStep, harness.PyTorchSteps-1, must.Sprint("suspended outside the run; the test proves nothing"))
	// Resume as 2: both restore tasks restore the suspend's checkpoint,
	// index 1's too, though index 1 holds an older checkpoint of its own
	// (from the 2 -> 1 above): scope "replica" takes the newest of any index.
	j.Scale(2)
	resumedTwo := j.RunningWorkers(2)
	var restored *nomadapi.TaskEvent
	for _, a := range resumedTwo {
		ev := c.WaitDriverEvent(t, a.ID, "restore", "Checkpoint restored")
		t.Logf("resumed %s: %s", a.Name, ev.DriverMessage)
		must.Eq(t, saved.Details["step"], ev.Details["step"],
			must.Sprintf("worker %s restored %q, not the suspend's checkpoint", a.Name, ev.DriverMessage))
		if strings.HasSuffix(a.Name, "[1]") {
			must.StrContains(t, ev.DriverMessage, "of allocation index 0")
		} else {
			must.Eq(t, saved.Details["generation"], ev.Details["generation"])
		}
		restored = ev
	}
	j.WaitStepWorkers(resumedTwo, savedStep+1, 2)

	// 2 -> 1 again, then train to the end alone.
	j.Scale(1)
	stopped2, resumed := j.StoppedAndKept(resumedTwo)
	j.Regroup(resumed.ID, 2, 1, savedStep)
	old := map[string]bool{two[0].ID: true, two[1].ID: true, stopped2.ID: true}
	j.CompletedWorker(old, 6*time.Minute)
	out := j.Log(resumed.ID)
	r, ok := harness.PyTorchRestored.Last(out, "2")
	must.True(t, ok, must.Sprintf("the resumed worker did not restore as one of 2:\n%s", out))
	must.Eq(t, savedStep, r, must.Sprint("the resumed workers did not start from the suspend checkpoint"))
	must.StrContains(t, out+j.Log(stopped2.ID), "from checkpoint ")
	final := harness.PyTorchFinal.FindStringSubmatch(out)
	must.SliceLen(t, 4, final, must.Sprintf("no final line:\n%s", out))
	must.Eq(t, strconv.Itoa(harness.PyTorchSteps), final[1])

	got, want, diff, same := j.AgainstReference(ref, final)
	t.Logf("pytorch elastic in %s containers: 1 -> 2 at step %d, 2 -> 1 at step %d, suspended at step %d "+
		"(generation %s), restored in %s; eval loss %.9f vs the uninterrupted host run's %.9f (|diff| %.2g, "+
		"tolerance %g); params equal bit for bit: %v", runtime, up, down, savedStep, saved.Details["generation"],
		restored.Details["duration"], got, want, diff, harness.PyTorchLossTolerance, same)
}
