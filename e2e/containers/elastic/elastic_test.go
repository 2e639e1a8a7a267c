// Package elastic_test runs the distributed container jobs on the real
// local cluster, under Nomad's docker driver against dockerd (client1) and
// against podman's Docker-compatible API (client2): the Go trainer's
// parameter servers and workers (jobspecs/train-elastic.nomad.hcl, driver=docker)
// and the elastic PyTorch job in the image built from Debian's
// python3-torch (jobspecs/train-pytorch-elastic.nomad.hcl, driver=docker), scaled,
// suspended, resumed and migrated (from one runtime to the other); and
// BenchmarkContainers_Elastic, containers against host processes. The
// single-task container tests are e2e/containers'. A missing runtime fails
// these tests.
package elastic_test

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

const elasticSteps = 2500

// elasticJob is the shipped elastic trainer jobspec, run with driver=docker
// (Nomad's docker driver); the clients it may run on decide the runtime.
const elasticJob = "jobspecs/train-elastic.nomad.hcl"

// TestContainers_Elastic: the distributed trainer as containers under
// Nomad's docker driver (jobspecs/train-elastic.nomad.hcl, driver=docker), started
// on one client (client1: dockerd; client2: podman): an on-demand checkpoint
// through the servers' sidecar, workers 1->3->2, servers
// 1->2, a suspension (both groups to 0: the coordinator saves on SIGTERM,
// the commit task commits, the other server's commit finds a skip marker)
// and a resume with 2 and 2 (the restore task restores), servers 2->1, and a
// migration of the coordinating server (alloc stop with its node
// ineligible) to the other client, under the other runtime, where more
// workers join; the final
// parameters bit for bit those of one uninterrupted process. Compute is
// MODELLED (1 ms per sample sleeps).
func TestContainers_Elastic(t *testing.T) {
	c := harness.Cluster(t)
	c.LoadImages(t)
	for _, d := range harness.ContainerRuntimes {
		t.Run(d.Name, func(t *testing.T) {
			c.RequireRuntimes(t, d)
			elasticRun(t, c, d.Name, d.Client, d.Other)
		})
	}
}

// elasticRun runs the scenario of TestContainers_Elastic starting under the
// runtime on the client from and migrating to the client to.
func elasticRun(t *testing.T, c *harness.C, runtime, from, to string) {
	jobID := "e2e-ctr-elastic-" + runtime
	_ = os.RemoveAll(filepath.Join(c.CheckpointDir, "default", jobID))
	want := harness.ElasticReference(t, elasticSteps)

	c.Eligible(t, to, false)
	t.Cleanup(func() {
		c.Eligible(t, from, true)
		c.Eligible(t, to, true)
	})
	j := &harness.Elastic{T: t, C: c, ID: jobID}
	c.RunJob(t, elasticJob, "driver=docker", "name="+jobID, "workers=1", "ps=1",
		fmt.Sprintf("steps=%d", elasticSteps), "compute_per_sample=1ms")

	co := j.Coordinator(nil)
	j.WaitShape(co, 1, 1)
	must.StrContains(t, j.Log(co), "compute=modelled 1ms/sample")
	// An on-demand checkpoint through the servers' sidecar: `trainer ps`
	// polls its request file.
	c.WaitDriverEvent(t, co, "checkpoint", `Checkpoint sidecar for task "ps" started`)
	_, err := c.CLI(t, "alloc", "signal", "-s", "SIGUSR1", co, "checkpoint")
	must.NoError(t, err)
	c.WaitDriverEvent(t, co, "checkpoint", "Checkpoint saved (on demand)")
	must.StrContains(t, j.Log(co), "checkpoint step=")
	j.Reshape(co)
	j.Suspend(co, "commit", "Checkpoint saved (exit)")

	t.Log("resume with 2 servers and 2 workers")
	j.Scale("ps", 2)
	j.Scale("worker", 2)
	old := map[string]bool{co: true}
	co = j.Coordinator(old)
	c.WaitDriverEvent(t, co, "restore", "Checkpoint restored")
	j.WaitLog(co, "resumed", func(log string) bool { return strings.Contains(log, "resumed step=") })
	j.WaitShape(co, 2, 2)

	t.Log("scale ps to 1")
	j.Scale("ps", 1)
	j.WaitShape(co, 2, 1)
	must.StrContains(t, j.Log(co), "leaving: taking its slice")

	t.Logf("migrate the coordinating server from %s to %s", from, to)
	c.Eligible(t, to, true)
	c.Eligible(t, from, false)
	_, err = c.CLI(t, "alloc", "stop", "-detach", co)
	must.NoError(t, err)
	old[co] = true
	co = j.Coordinator(old)
	a, _, err := c.Nomad.Allocations().Info(co, nil)
	must.NoError(t, err)
	must.Eq(t, to, a.NodeName, must.Sprint("the replacement coordinator runs on the other client"))
	c.WaitDriverEvent(t, co, "restore", "Checkpoint restored")
	j.WaitLog(co, "resumed", func(log string) bool { return strings.Contains(log, "resumed step=") })
	j.Scale("worker", 4) // finish sooner; the new workers run on the other client

	step, hash, log := j.Final(co)
	must.Eq(t, strconv.Itoa(elasticSteps), step)
	must.Eq(t, want, hash, must.Sprint("final parameters differ from the single-process run"))
	t.Logf("coordinator %s:\n%s", co, harness.Tail(log, 8))
}
