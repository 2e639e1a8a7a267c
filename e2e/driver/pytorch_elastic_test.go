package driver

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// TestPyTorchElastic_ScaleSuspendResume runs the elastic PyTorch jobspec
// (torch.distributed.elastic, c10d rendezvous through a Nomad service, DDP
// over gloo on CPU) through 1 -> 2 -> 1 workers, a move of the rendezvous
// store's allocation, a suspend (scale to 0) and a resume, next to an
// uninterrupted run of the same job. Every membership change and the store's
// move continue from the step the group stopped at (live snapshot), the
// resume from the step rank 0 checkpointed, and the final evaluation loss
// matches the uninterrupted run's within harness.PyTorchLossTolerance.
func TestPyTorchElastic_ScaleSuspendResume(t *testing.T) {
	c := harness.Cluster(t)
	harness.RequireTorch(t)
	const ref, job = "pte-reference", "pte-elastic"
	c.StopJob(t, ref)
	c.StopJob(t, job)
	c.RunJob(t, harness.PyTorchHostJobspec, c.PyTorchHostVars(ref)...)
	c.RunJob(t, harness.PyTorchHostJobspec, c.PyTorchHostVars(job)...)
	j := c.PyTorch(t, job)

	// 1 -> 2: the first worker leaves at an agreed step with a live snapshot;
	// both ranks of the new group start from that step.
	up, two := j.GrowToTwo(j.RunningWorkers(1)[0], 1000)

	// 2 -> 1: the stopped allocation answers its stop checkpoint (state if it
	// held rank 0, a skip marker otherwise); the other continues alone.
	j.Scale(1)
	stopped, kept := j.StoppedAndKept(two)
	stoppedAlloc, _, err := c.Nomad.Allocations().Info(stopped.ID, nil)
	must.NoError(t, err)
	saved := checkpointEvent(stoppedAlloc, harness.PyTorchTask, "Checkpoint saved (stop)")
	skipped := checkpointEvent(stoppedAlloc, harness.PyTorchTask, "Checkpoint not needed (stop)")
	must.True(t, saved != nil || skipped != nil, must.Sprint("the stopped worker answered neither with its state nor a skip marker"))
	snap2, down := j.Regroup(kept.ID, 2, 1, up)
	must.Eq(t, snap2, down, must.Sprint("the group of 1 did not start from the step the group of 2 stopped at"))
	j.WaitStepWorkers([]*nomadapi.AllocationListStub{kept}, down+1, 1)

	// The store's allocation moves (alloc stop: Nomad places a new one on
	// another port): the launcher reads the new address from its template
	// and the worker continues from the step it stopped at.
	out := j.Log(kept.ID)
	snapsBefore, restoresBefore := len(harness.PyTorchSnapshot.All(out, "1")), len(harness.PyTorchRestored.All(out, "1"))
	_, err = c.CLI(t, "alloc", "stop", "-detach", j.GroupAlloc("rendezvous").ID)
	must.NoError(t, err)
	var snap3, moved int
	harness.Eventually(t, 5*time.Minute, func() error {
		out := j.Log(kept.ID)
		snaps, restores := harness.PyTorchSnapshot.All(out, "1"), harness.PyTorchRestored.All(out, "1")
		if len(snaps) == snapsBefore || len(restores) == restoresBefore {
			return fmt.Errorf("no rendezvous at the moved store yet:\n%s", harness.Tail(out, 8))
		}
		snap3, moved = snaps[len(snaps)-1], restores[len(restores)-1]
		return nil
	})
	must.Eq(t, snap3, moved, must.Sprint("after the store moved, the worker did not continue from the step it stopped at"))
	j.WaitStepWorkers([]*nomadapi.AllocationListStub{kept}, moved+1, 1)

	// Suspend: rank 0 checkpoints on stop; resume restores that step.
	j.Scale(0)
	suspended := c.WaitAllocStatus(t, kept.ID, nomadapi.AllocClientStatusComplete, 3*time.Minute)
	ev := checkpointEvent(suspended, harness.PyTorchTask, "Checkpoint saved (stop)")
	must.NotNil(t, ev, must.Sprint("no checkpoint saved on suspend"))
	savedStep, err := strconv.Atoi(ev.Details["step"])
	must.NoError(t, err)
	must.GreaterEq(t, moved, savedStep)
	j.Scale(1)
	resumed := j.CompletedWorker(map[string]bool{two[0].ID: true, two[1].ID: true}, 6*time.Minute)
	r, final := j.ResumedFinal(resumed.ID, savedStep)

	// The uninterrupted run, and the rendezvous hosts that exit when done.
	got, want, diff, same := j.AgainstReference(ref, final)
	t.Logf("pytorch elastic: 1 -> 2 at step %d, 2 -> 1 at step %d (stopped worker: saved=%v), store moved at step %d, "+
		"suspended at step %d, resumed at %d; eval loss %.9f vs uninterrupted %.9f (|diff| %.2g, tolerance %g); "+
		"params equal bit for bit: %v",
		up, down, saved != nil, moved, savedStep, r, got, want, diff, harness.PyTorchLossTolerance, same)
}
