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
// (jobspecs/train-elastic-docker.nomad.hcl), started under dockerd
// (client1): workers 1->3->2, servers 1->2, a suspension (both groups to
// 0: the coordinator saves on SIGTERM, the commit task commits, the other
// server's commit finds a skip marker) and a resume with 2 and 2 (the
// restore task restores), servers 2->1, and a migration of the coordinating
// server (alloc stop with client1 ineligible) to podman (client2), where
// more workers join; the final parameters bit for bit those of one
// uninterrupted process. Compute is MODELLED (1 ms per sample sleeps).
func TestContainers_Elastic(t *testing.T) {
	c := harness.Cluster(t)
	loadImages(t, c)
	requireRuntime(t, c, "client1", "docker")
	requireRuntime(t, c, "client2", "podman")
	const jobID = "e2e-ctr-elastic"
	_ = os.RemoveAll(filepath.Join(c.CheckpointDir, "default", jobID))
	want := harness.ElasticReference(t, elasticSteps)

	setEligible(t, c, "client2", false)
	t.Cleanup(func() {
		setEligible(t, c, "client1", true)
		setEligible(t, c, "client2", true)
	})
	j := &harness.Elastic{T: t, C: c, ID: jobID}
	c.RunJob(t, elasticJob, "name="+jobID, "workers=1", "ps=1",
		fmt.Sprintf("steps=%d", elasticSteps), "compute_per_sample=1ms")

	co := j.Coordinator(nil)
	j.WaitShape(co, 1, 1)
	must.StrContains(t, j.Log(co), "compute=modelled 1ms/sample")
	for _, s := range []struct {
		group       string
		n, workers  int
		ps          int
		mustContain string
	}{
		{"worker", 3, 3, 1, ""},
		{"worker", 2, 2, 1, ""},
		{"ps", 2, 2, 2, "resharded"},
	} {
		t.Logf("scale %s to %d", s.group, s.n)
		j.Scale(s.group, s.n)
		j.WaitShape(co, s.workers, s.ps)
		must.StrContains(t, j.Log(co), s.mustContain)
	}

	t.Log("suspend: both groups to 0")
	j.Scale("worker", 0)
	j.Scale("ps", 0)
	j.AllStopped()
	must.StrContains(t, j.Log(co), "checkpoint step=")
	j.Event(".ps[0]", "commit", "Checkpoint saved (exit)")
	j.Event(".ps[1]", "commit", "Checkpoint not needed")

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

	t.Log("migrate the coordinating server from dockerd (client1) to podman (client2)")
	setEligible(t, c, "client2", true)
	setEligible(t, c, "client1", false)
	_, err := c.CLI(t, "alloc", "stop", "-detach", co)
	must.NoError(t, err)
	old[co] = true
	co = j.Coordinator(old)
	a, _, err := c.Nomad.Allocations().Info(co, nil)
	must.NoError(t, err)
	must.Eq(t, "client2", a.NodeName, must.Sprint("the replacement coordinator runs under podman"))
	roleEvent(t, c, co, "restore", "Checkpoint restored")
	j.WaitLog(co, "resumed", func(log string) bool { return strings.Contains(log, "resumed step=") })
	j.Scale("worker", 4) // finish sooner; the new workers run under podman

	step, hash, log := j.Final(co)
	must.Eq(t, strconv.Itoa(elasticSteps), step)
	must.Eq(t, want, hash, must.Sprint("final parameters differ from the single-process run"))
	t.Logf("coordinator %s:\n%s", co, harness.Tail(log, 8))
}
