package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

const (
	pytorchJobspec = "jobspecs/train-pytorch.nomad.hcl"
	pytorchJob     = "train-pytorch"
	pytorchTask    = "train"
	pytorchSteps   = 8000
)

var (
	pytorchStep    = regexp.MustCompile(`(?m)^step=(\d+) `)
	pytorchResumed = regexp.MustCompile(`(?m)^resumed step=(\d+) `)
	pytorchFinal   = regexp.MustCompile(`(?m)^final step=(\d+) .*params_sha256=([0-9a-f]{64})`)
)

// TestPyTorch_SuspendResumeBitForBit runs the PyTorch jobspec twice: once
// uninterrupted, once suspended (scale to 0) at a few thousand steps and
// resumed (scale to 1). The resumed run restarts from its checkpoint, not
// from 0, and ends with the same parameters, bit for bit.
func TestPyTorch_SuspendResumeBitForBit(t *testing.T) {
	c := harness.Cluster(t)
	harness.RequireTorch(t)
	vars := []string{"python=" + harness.HostPython, "steps=" + strconv.Itoa(pytorchSteps), "checkpoint_interval=",
		"caravan_python=" + filepath.Join(c.Root, "python")}
	clean := func() {
		c.StopJob(t, pytorchJob)
		must.NoError(t, os.RemoveAll(filepath.Join(c.CheckpointDir, "default", pytorchJob)))
	}
	clean()

	// The reference: no interruption.
	c.RunJob(t, pytorchJobspec, vars...)
	ref := c.WaitAllocs(t, pytorchJob, 3*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		return len(as) == 1 && as[0].ClientStatus == nomadapi.AllocClientStatusComplete
	})
	refFinal := pytorchFinal.FindStringSubmatch(c.Logs(t, ref[0].ID, pytorchTask, "stdout"))
	must.SliceLen(t, 3, refFinal)
	clean()

	// Suspended and resumed.
	c.RunJob(t, pytorchJobspec, vars...)
	first := c.WaitAllocs(t, pytorchJob, 2*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		return len(as) == 1 && as[0].ClientStatus == nomadapi.AllocClientStatusRunning
	})[0]
	harness.Eventually(t, 2*time.Minute, func() error {
		ms := pytorchStep.FindAllStringSubmatch(c.Logs(t, first.ID, pytorchTask, "stdout"), -1)
		if len(ms) == 0 {
			return fmt.Errorf("no progress yet")
		}
		if n, _ := strconv.Atoi(ms[len(ms)-1][1]); n < 1500 {
			return fmt.Errorf("at step %d", n)
		}
		return nil
	})
	_, err := c.CLI(t, "job", "scale", "-detach", pytorchJob, "train", "0")
	must.NoError(t, err)
	stopped := c.WaitAllocStatus(t, first.ID, nomadapi.AllocClientStatusComplete, 2*time.Minute)
	saved := checkpointEvent(stopped, pytorchTask, "Checkpoint saved")
	must.NotNil(t, saved, must.Sprint("no checkpoint event on the suspended allocation"))
	savedStep, err := strconv.Atoi(saved.Details["step"])
	must.NoError(t, err)
	must.Positive(t, savedStep)
	must.Less(t, pytorchSteps, savedStep)

	_, err = c.CLI(t, "job", "scale", "-detach", pytorchJob, "train", "1")
	must.NoError(t, err)
	var second *nomadapi.AllocationListStub
	c.WaitAllocs(t, pytorchJob, 3*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		for _, a := range as {
			if a.ID != first.ID && a.ClientStatus == nomadapi.AllocClientStatusComplete {
				second = a
				return true
			}
		}
		return false
	})
	out := c.Logs(t, second.ID, pytorchTask, "stdout")
	resumed := pytorchResumed.FindStringSubmatch(out)
	must.SliceLen(t, 2, resumed, must.Sprintf("the resumed run did not restore its checkpoint:\n%s", out))
	must.Eq(t, strconv.Itoa(savedStep), resumed[1])
	final := pytorchFinal.FindStringSubmatch(out)
	must.SliceLen(t, 3, final)
	must.Eq(t, strconv.Itoa(pytorchSteps), final[1])
	must.Eq(t, refFinal[2], final[2], must.Sprint("suspended and resumed PyTorch run differs from the uninterrupted one"))
	t.Logf("pytorch: suspended at step %d, resumed at %s, final params_sha256 %s equal to the uninterrupted run's", savedStep, resumed[1], final[2][:16])
}

// checkpointEvent returns the task's last event whose message starts with
// prefix, or nil.
func checkpointEvent(a *nomadapi.Allocation, task, prefix string) *nomadapi.TaskEvent {
	ts, ok := a.TaskStates[task]
	if !ok {
		return nil
	}
	for i := len(ts.Events) - 1; i >= 0; i-- {
		if e := ts.Events[i]; strings.HasPrefix(e.DisplayMessage, prefix) {
			return e
		}
	}
	return nil
}
