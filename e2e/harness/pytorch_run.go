package harness

import (
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
)

// How the e2e tests run the elastic PyTorch job (shared by e2e/driver,
// e2e/containers and e2e/planner): its length and pacing are those the loss
// tolerance (PyTorchLossTolerance) was measured at.
const (
	// HostPython is Debian's interpreter with python3-torch (make e2e-deps).
	HostPython = "/usr/bin/python3"
	// PyTorchHostJobspec is the elastic job as host processes of the caravan driver.
	PyTorchHostJobspec = "jobspecs/train-pytorch-elastic.nomad.hcl"
	PyTorchSteps       = 6000
	// PyTorchPace paces each step for the tests (not a compute model).
	PyTorchPace = "min_step_time=0.02"
)

// RequireTorch fails the test when HostPython cannot import torch.
func RequireTorch(t testing.TB) {
	t.Helper()
	if err := exec.Command(HostPython, "-c", "import torch").Run(); err != nil {
		t.Fatalf("%s cannot import torch (make e2e-deps installs Debian's python3-torch): %v", HostPython, err)
	}
}

// PyTorchHostVars are the variables that run PyTorchHostJobspec as job
// name for PyTorchSteps paced steps, with the repository's Python helper
// and no periodic checkpoint.
func (c *C) PyTorchHostVars(name string) []string {
	return []string{"name=" + name, "python=" + HostPython, "caravan_python=" + filepath.Join(c.Root, "python"),
		"steps=" + strconv.Itoa(PyTorchSteps), "checkpoint_interval=", PyTorchPace}
}

// GrowToTwo scales a one-worker job to 2 once the worker first has logged
// step atStep, and checks that the group of 2 starts from the step the
// group of 1 stopped at (its live snapshot). It returns that step and the
// two running workers, once a step of the pair has been logged.
func (j *PyTorchJob) GrowToTwo(first *nomadapi.AllocationListStub, atStep int) (int, []*nomadapi.AllocationListStub) {
	j.t.Helper()
	j.WaitStep(first.ID, atStep)
	j.Scale(2)
	snap, up := j.Regroup(first.ID, 1, 2, 0)
	must.Eq(j.t, snap, up, must.Sprint("the group of 2 did not start from the step the group of 1 stopped at"))
	two := j.RunningWorkers(2)
	j.WaitStepWorkers(two, up+1, 2)
	return up, two
}

// StoppedAndKept waits, after a scale-down from the two workers two, until
// one of them has completed and the other runs.
func (j *PyTorchJob) StoppedAndKept(two []*nomadapi.AllocationListStub) (stopped, kept *nomadapi.AllocationListStub) {
	j.t.Helper()
	j.c.WaitAllocs(j.t, j.ID, 3*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		stopped, kept = nil, nil
		for _, a := range as {
			if a.TaskGroup != PyTorchWorkerGroup || (a.ID != two[0].ID && a.ID != two[1].ID) {
				continue
			}
			if a.DesiredStatus == nomadapi.AllocDesiredStatusStop && a.ClientStatus == nomadapi.AllocClientStatusComplete {
				stopped = a
			} else if a.ClientStatus == nomadapi.AllocClientStatusRunning {
				kept = a
			}
		}
		return stopped != nil && kept != nil
	})
	return stopped, kept
}

// ResumedFinal checks the log of a worker resumed alone from a suspend: it
// restored step savedStep from a checkpoint and ran to PyTorchSteps. It
// returns the restored step and the final line's submatches.
func (j *PyTorchJob) ResumedFinal(allocID string, savedStep int) (int, []string) {
	j.t.Helper()
	out := j.Log(allocID)
	r, ok := PyTorchRestored.Last(out, "1")
	must.True(j.t, ok, must.Sprintf("the resumed worker did not restore:\n%s", out))
	must.Eq(j.t, savedStep, r, must.Sprint("the resumed worker did not start from the suspend checkpoint"))
	must.StrContains(j.t, out, "from checkpoint ")
	final := PyTorchFinal.FindStringSubmatch(out)
	must.SliceLen(j.t, 4, final, must.Sprintf("no final line:\n%s", out))
	must.Eq(j.t, strconv.Itoa(PyTorchSteps), final[1])
	return r, final
}

// LossDiff compares two final lines (PyTorchFinal submatches): it fails the
// test when their eval losses differ by more than PyTorchLossTolerance and
// returns the losses, their difference and whether the parameters are
// equal bit for bit.
func LossDiff(t testing.TB, got, want []string) (gotLoss, wantLoss, diff float64, sameParams bool) {
	t.Helper()
	gotLoss, err := strconv.ParseFloat(got[2], 64)
	must.NoError(t, err)
	wantLoss, err = strconv.ParseFloat(want[2], 64)
	must.NoError(t, err)
	diff = math.Abs(gotLoss - wantLoss)
	must.True(t, diff <= PyTorchLossTolerance,
		must.Sprintf("final eval loss %v differs from the reference's %v by more than %g", gotLoss, wantLoss, PyTorchLossTolerance))
	return gotLoss, wantLoss, diff, got[3] == want[3]
}

// AgainstReference waits for the uninterrupted reference job ref to finish
// and for both jobs' rendezvous hosts to exit, then compares final (this
// job's final line) with the reference's (LossDiff).
func (j *PyTorchJob) AgainstReference(ref string, final []string) (gotLoss, wantLoss, diff float64, sameParams bool) {
	j.t.Helper()
	r := j.c.PyTorch(j.t, ref)
	refFinal := r.Final(PyTorchSteps)
	r.RendezvousDone()
	j.RendezvousDone()
	return LossDiff(j.t, final, refFinal)
}
