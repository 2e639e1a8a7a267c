// Package elastic runs the distributed, elastic trainer
// (jobspecs/train-elastic.nomad.hcl) on the local cluster through worker
// and parameter-server scaling, a suspension, a resume and a migration, and
// checks that it ends with the parameters of one uninterrupted process.
package elastic

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

const (
	jobspec = "jobspecs/train-elastic.nomad.hcl"
	jobID   = "e2e-train-elastic"
	steps   = 2500
	// computePerSample is MODELLED GPU time per sample (a sleep in each
	// worker): about 15 steps/s for one worker at the default batch of 64.
	computePerSample = "1ms"
)

// TestElasticTrainingOnTheCluster: workers 1->3->2, servers 1->2, a
// suspension (both groups to 0) and resume with 2 servers, servers 2->1, a
// migration of the coordinating server, and the final parameters bit for bit those of one
// uninterrupted process.
func TestElasticTrainingOnTheCluster(t *testing.T) {
	c := harness.Cluster(t)
	_ = os.RemoveAll(filepath.Join(c.CheckpointDir, "default", jobID))
	want := harness.ElasticReference(t, steps)
	j := &harness.Elastic{T: t, C: c, ID: jobID}
	c.RunJob(t, jobspec, "name="+jobID, "caravan_bin="+c.Bin, "workers=1", "ps=1",
		fmt.Sprintf("steps=%d", steps), "compute_per_sample="+computePerSample, "checkpoint_interval=")

	co := j.Coordinator(nil)
	j.WaitShape(co, 1, 1)
	must.StrContains(t, j.Log(co), "compute=modelled 1ms/sample")

	j.Reshape(co)
	j.Suspend(co, "ps", "Checkpoint saved (stop)")

	t.Log("resume with 2 servers and 2 workers")
	j.Scale("ps", 2)
	j.Scale("worker", 2)
	old := map[string]bool{co: true}
	co = j.Coordinator(old)
	j.WaitLog(co, "resumed", func(log string) bool { return strings.Contains(log, "resumed step=") })
	j.WaitShape(co, 2, 2)

	t.Log("scale ps to 1")
	j.Scale("ps", 1)
	j.WaitShape(co, 2, 1)
	must.StrContains(t, j.Log(co), "leaving: taking its slice")

	t.Log("migrate the coordinating parameter server")
	_, err := c.CLI(t, "alloc", "stop", "-detach", co)
	must.NoError(t, err)
	old[co] = true
	co = j.Coordinator(old)
	j.WaitLog(co, "resumed", func(log string) bool { return strings.Contains(log, "resumed step=") })
	j.Scale("worker", 4) // finish sooner

	step, hash, log := j.Final(co)
	must.Eq(t, strconv.Itoa(steps), step)
	must.Eq(t, want, hash, must.Sprint("final parameters differ from the single-process run"))
	t.Logf("coordinator %s:\n%s", co, harness.Tail(log, 8))
}
