package containers_test

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
	elasticJob   = "jobspecs/train-elastic-docker.nomad.hcl"
	elasticSteps = 2500
)

// setEligible marks a client eligible for placements or not.
func setEligible(t *testing.T, c *harness.C, client string, on bool) {
	t.Helper()
	flag := "-disable"
	if on {
		flag = "-enable"
	}
	_, err := c.CLI(t, "node", "eligibility", flag, c.Client(t, client).NodeID)
	must.NoError(t, err)
}

// TestContainers_Elastic: the distributed trainer as containers
// (jobspecs/train-elastic-docker.nomad.hcl), started under one runtime
// (dockerd on client1, or podman on client2): an on-demand checkpoint
// through the servers' sidecar, workers 1->3->2, servers
// 1->2, a suspension (both groups to 0: the coordinator saves on SIGTERM,
// the commit task commits, the other server's commit finds a skip marker)
// and a resume with 2 and 2 (the restore task restores), servers 2->1, and a
// migration of the coordinating server (alloc stop with its node
// ineligible) to the other runtime, where more workers join; the final
// parameters bit for bit those of one uninterrupted process. Compute is
// MODELLED (1 ms per sample sleeps).
func TestContainers_Elastic(t *testing.T) {
	c := harness.Cluster(t)
	loadImages(t, c)
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			other := runtimes[0]
			if other.name == rt.name {
				other = runtimes[1]
			}
			requireRuntime(t, c, rt.client, rt.name)
			requireRuntime(t, c, other.client, other.name)
			elasticRun(t, c, "e2e-ctr-elastic-"+rt.name, rt.client, other.client)
		})
	}
}

// elasticRun runs the scenario of TestContainers_Elastic, starting on the
// client from and migrating to the client to.
func elasticRun(t *testing.T, c *harness.C, jobID, from, to string) {
	_ = os.RemoveAll(filepath.Join(c.CheckpointDir, "default", jobID))
	want := harness.ElasticReference(t, elasticSteps)

	setEligible(t, c, to, false)
	t.Cleanup(func() {
		setEligible(t, c, from, true)
		setEligible(t, c, to, true)
	})
	j := &harness.Elastic{T: t, C: c, ID: jobID}
	c.RunJob(t, elasticJob, "name="+jobID, "workers=1", "ps=1",
		fmt.Sprintf("steps=%d", elasticSteps), "compute_per_sample=1ms")

	co := j.Coordinator(nil)
	j.WaitShape(co, 1, 1)
	must.StrContains(t, j.Log(co), "compute=modelled 1ms/sample")
	// An on-demand checkpoint through the servers' sidecar: `trainer ps`
	// polls its request file.
	roleEvent(t, c, co, "checkpoint", `Checkpoint sidecar for task "ps" started`)
	_, err := c.CLI(t, "alloc", "signal", "-s", "SIGUSR1", co, "checkpoint")
	must.NoError(t, err)
	roleEvent(t, c, co, "checkpoint", "Checkpoint saved (on demand)")
	must.StrContains(t, j.Log(co), "checkpoint step=")
	j.Reshape(co)
	j.Suspend(co, "commit", "Checkpoint saved (exit)")

	t.Log("resume with 2 servers and 2 workers")
	j.Scale("ps", 2)
	j.Scale("worker", 2)
	old := map[string]bool{co: true}
	co = j.Coordinator(old)
	roleEvent(t, c, co, "restore", "Checkpoint restored")
	j.WaitLog(co, "resumed", func(log string) bool { return strings.Contains(log, "resumed step=") })
	j.WaitShape(co, 2, 2)

	t.Log("scale ps to 1")
	j.Scale("ps", 1)
	j.WaitShape(co, 2, 1)
	must.StrContains(t, j.Log(co), "leaving: taking its slice")

	t.Logf("migrate the coordinating server from %s to %s", from, to)
	setEligible(t, c, to, true)
	setEligible(t, c, from, false)
	_, err = c.CLI(t, "alloc", "stop", "-detach", co)
	must.NoError(t, err)
	old[co] = true
	co = j.Coordinator(old)
	a, _, err := c.Nomad.Allocations().Info(co, nil)
	must.NoError(t, err)
	must.Eq(t, to, a.NodeName, must.Sprint("the replacement coordinator runs on the other runtime"))
	roleEvent(t, c, co, "restore", "Checkpoint restored")
	j.WaitLog(co, "resumed", func(log string) bool { return strings.Contains(log, "resumed step=") })
	j.Scale("worker", 4) // finish sooner; the new workers run on the other runtime

	step, hash, log := j.Final(co)
	must.Eq(t, strconv.Itoa(elasticSteps), step)
	must.Eq(t, want, hash, must.Sprint("final parameters differ from the single-process run"))
	t.Logf("coordinator %s:\n%s", co, harness.Tail(log, 8))
}
