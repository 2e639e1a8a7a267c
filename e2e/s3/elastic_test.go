package s3

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
	"github.com/caravan-nomad/caravan/trainer"
)

const (
	elasticSpec  = "jobspecs/train-elastic.nomad.hcl"
	elasticJob   = "e2e-s3-train-elastic"
	elasticSteps = 2500
)

var elasticStepRe = regexp.MustCompile(`(?m)^step=(\d+) .*workers=(\d+) ps=(\d+)`)

// TestS3_ElasticScaling runs the elastic trainer with its checkpoints in
// S3: workers 1 -> 3 -> 2, a suspension (both groups to 0) and a resume,
// then a migration of the coordinating server, ending with the parameters
// of one uninterrupted process, bit for bit.
func TestS3_ElasticScaling(t *testing.T) {
	c, s := s3Cluster(t)
	cfg := trainer.DefaultConfig()
	cfg.Steps, cfg.LogEvery = elasticSteps, 0
	res, err := trainer.Run(context.Background(), cfg, trainer.Options{})
	must.NoError(t, err)
	want := res.Hash

	c.RunJob(t, elasticSpec, "name="+elasticJob, "caravan_bin="+c.Bin, "workers=1", "ps=1",
		fmt.Sprintf("steps=%d", elasticSteps), "compute_per_sample=1ms", "checkpoint_interval=")
	co := coordinator(t, c, nil)
	waitShape(t, c, co, 1, 1)
	for _, n := range []int{3, 2} {
		t.Logf("scale workers to %d", n)
		scale(t, c, "worker", n)
		waitShape(t, c, co, n, 1)
	}

	t.Log("suspend: both groups to 0")
	scale(t, c, "worker", 0)
	scale(t, c, "ps", 0)
	c.WaitAllStopped(t, elasticJob, 2*time.Minute)
	psEvent(t, c, co, "Checkpoint saved (stop)")
	must.SliceNotEmpty(t, bucketKeys(t, s, s.Prefix+"/"))

	t.Log("resume with 1 server and 2 workers")
	scale(t, c, "ps", 1)
	scale(t, c, "worker", 2)
	old := map[string]bool{co: true}
	co = coordinator(t, c, old)
	psEvent(t, c, co, "Checkpoint restored")
	waitLog(t, c, co, "resumed", func(log string) bool { return strings.Contains(log, "resumed step=") })

	t.Log("migrate the coordinating parameter server")
	_, err = c.CLI(t, "alloc", "stop", "-detach", co)
	must.NoError(t, err)
	old[co] = true
	co = coordinator(t, c, old)
	psEvent(t, c, co, "Checkpoint restored")

	log := waitLog(t, c, co, "the final line", func(log string) bool { return harness.TrainerFinalRe.MatchString(log) })
	m := harness.TrainerFinalRe.FindStringSubmatch(log)
	must.Eq(t, strconv.Itoa(elasticSteps), m[1])
	must.Eq(t, want, m[2], must.Sprint("final parameters differ from the single-process run"))
}

func scale(t *testing.T, c *harness.C, group string, n int) {
	t.Helper()
	_, err := c.CLI(t, "job", "scale", "-detach", elasticJob, group, strconv.Itoa(n))
	must.NoError(t, err)
}

// coordinator waits for the running parameter server of index 0 not in
// old, and returns its ID.
func coordinator(t *testing.T, c *harness.C, old map[string]bool) string {
	t.Helper()
	var id string
	c.WaitAllocs(t, elasticJob, 2*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		for _, a := range as {
			if strings.HasSuffix(a.Name, ".ps[0]") && a.DesiredStatus == "run" && a.ClientStatus == "running" && !old[a.ID] {
				id = a.ID
				return true
			}
		}
		return false
	})
	return id
}

func waitLog(t *testing.T, c *harness.C, alloc, what string, ok func(string) bool) string {
	t.Helper()
	var log string
	harness.Eventually(t, 3*time.Minute, func() error {
		log, _ = c.CLI(t, "alloc", "logs", alloc, "ps")
		if !ok(log) {
			return fmt.Errorf("waiting for %s in the log of %s:\n%s", what, alloc, harness.Tail(log, 8))
		}
		return nil
	})
	return log
}

// waitShape waits for a progress line with these workers and servers after
// the log's current end.
func waitShape(t *testing.T, c *harness.C, alloc string, workers, ps int) {
	t.Helper()
	cur, _ := c.CLI(t, "alloc", "logs", alloc, "ps")
	from := len(cur)
	waitLog(t, c, alloc, fmt.Sprintf("workers=%d ps=%d", workers, ps), func(log string) bool {
		for _, m := range elasticStepRe.FindAllStringSubmatch(log[min(from, len(log)):], -1) {
			if m[2] == strconv.Itoa(workers) && m[3] == strconv.Itoa(ps) {
				return true
			}
		}
		return false
	})
}

// psEvent waits for a task event of the parameter server allocation
// containing substr.
func psEvent(t *testing.T, c *harness.C, alloc, substr string) {
	t.Helper()
	harness.Eventually(t, 2*time.Minute, func() error {
		var seen []string
		for _, e := range c.TaskEvents(t, alloc, "ps") {
			if strings.Contains(e.DisplayMessage, substr) {
				return nil
			}
			seen = append(seen, e.DisplayMessage)
		}
		return fmt.Errorf("no %q event on %s; events: %q", substr, alloc, seen)
	})
}
