// Package elastic runs the distributed, elastic trainer
// (jobspecs/train-elastic.nomad.hcl) on the local cluster through worker
// and parameter-server scaling, a suspension, a resume and a migration, and
// checks that it ends with the parameters of one uninterrupted process.
package elastic

import (
	"context"
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
	"github.com/caravan-nomad/caravan/trainer"
)

const (
	jobspec = "jobspecs/train-elastic.nomad.hcl"
	jobID   = "e2e-train-elastic"
	steps   = 2500
	// computePerSample is MODELLED GPU time per sample (a sleep in each
	// worker): about 15 steps/s for one worker at the default batch of 64.
	computePerSample = "1ms"
)

var (
	stepRe  = regexp.MustCompile(`(?m)^step=(\d+) .*workers=(\d+) ps=(\d+)(?: grad_sqr=\S+ grad_var=\S+)?$`)
	finalRe = regexp.MustCompile(`final step=(\d+) .* params_sha256=([0-9a-f]{64})`)
)

// reference is the single-process run of the same configuration, in-process.
func reference(t *testing.T) string {
	c := trainer.DefaultConfig()
	c.Steps, c.LogEvery = steps, 0
	res, err := trainer.Run(context.Background(), c, trainer.Options{})
	must.NoError(t, err)
	return res.Hash
}

type job struct {
	t *testing.T
	c *harness.C
}

func (j *job) scale(group string, n int) {
	j.t.Helper()
	_, err := j.c.CLI(j.t, "job", "scale", "-detach", jobID, group, strconv.Itoa(n))
	must.NoError(j.t, err)
}

// coordinator waits for the running parameter server of index 0 that is
// not in old, and returns its ID.
func (j *job) coordinator(old map[string]bool) string {
	j.t.Helper()
	var id string
	j.c.WaitAllocs(j.t, jobID, 2*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
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

// waitLog waits until the coordinator's log satisfies ok.
func (j *job) waitLog(alloc, what string, ok func(log string) bool) string {
	j.t.Helper()
	var log string
	harness.Eventually(j.t, 2*time.Minute, func() error {
		log, _ = j.c.CLI(j.t, "alloc", "logs", alloc, "ps")
		if !ok(log) {
			return fmt.Errorf("waiting for %s in the log of %s:\n%s", what, alloc, harness.Tail(log, 8))
		}
		return nil
	})
	return log
}

// waitShape waits for a progress line with these workers and servers,
// after the current end of the log.
func (j *job) waitShape(alloc string, workers, ps int) {
	j.t.Helper()
	from := len(j.logOf(alloc))
	j.waitLog(alloc, fmt.Sprintf("workers=%d ps=%d", workers, ps), func(log string) bool {
		for _, m := range stepRe.FindAllStringSubmatch(log[min(from, len(log)):], -1) {
			if m[2] == strconv.Itoa(workers) && m[3] == strconv.Itoa(ps) {
				return true
			}
		}
		return false
	})
}

func (j *job) logOf(alloc string) string {
	log, _ := j.c.CLI(j.t, "alloc", "logs", alloc, "ps")
	return log
}

func (j *job) allStopped() {
	j.t.Helper()
	j.c.WaitAllocs(j.t, jobID, 2*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		for _, a := range as {
			if a.ClientStatus == "running" || a.ClientStatus == "pending" {
				return false
			}
		}
		return true
	})
}

// TestElasticTrainingOnTheCluster: workers 1->3->2, servers 1->2, a
// suspension (both groups to 0) and resume with 2 servers, servers 2->1, a
// migration of the coordinating server, and the final parameters bit for bit those of one
// uninterrupted process.
func TestElasticTrainingOnTheCluster(t *testing.T) {
	c := harness.Cluster(t)
	_ = os.RemoveAll(filepath.Join(c.CheckpointDir, "default", jobID))
	want := reference(t)
	j := &job{t: t, c: c}
	c.RunJob(t, jobspec, "name="+jobID, "caravan_bin="+c.Bin, "workers=1", "ps=1",
		fmt.Sprintf("steps=%d", steps), "compute_per_sample="+computePerSample, "checkpoint_interval=")

	co := j.coordinator(nil)
	j.waitShape(co, 1, 1)
	must.StrContains(t, j.logOf(co), "compute=modelled 1ms/sample")

	for _, s := range []struct {
		group     string
		n         int
		workers   int
		ps        int
		mustExist string
	}{
		{"worker", 3, 3, 1, ""},
		{"worker", 2, 2, 1, ""},
		{"ps", 2, 2, 2, "resharded"},
	} {
		t.Logf("scale %s to %d", s.group, s.n)
		j.scale(s.group, s.n)
		j.waitShape(co, s.workers, s.ps)
		must.StrContains(t, j.logOf(co), s.mustExist)
	}

	t.Log("suspend: both groups to 0")
	j.scale("worker", 0)
	j.scale("ps", 0)
	j.allStopped()
	must.StrContains(t, j.logOf(co), "checkpoint step=")
	j.event(".ps[0]", "Checkpoint saved (stop)")
	// The second server answered the stop's checkpoint request with a skip
	// marker: the coordinator writes the state.
	j.event(".ps[1]", "Checkpoint not needed")

	t.Log("resume with 2 servers and 2 workers")
	j.scale("ps", 2)
	j.scale("worker", 2)
	old := map[string]bool{co: true}
	co = j.coordinator(old)
	j.waitLog(co, "resumed", func(log string) bool { return strings.Contains(log, "resumed step=") })
	j.waitShape(co, 2, 2)

	t.Log("scale ps to 1")
	j.scale("ps", 1)
	j.waitShape(co, 2, 1)
	must.StrContains(t, j.logOf(co), "leaving: taking its slice")

	t.Log("migrate the coordinating parameter server")
	_, err := c.CLI(t, "alloc", "stop", "-detach", co)
	must.NoError(t, err)
	old[co] = true
	co = j.coordinator(old)
	j.waitLog(co, "resumed", func(log string) bool { return strings.Contains(log, "resumed step=") })
	j.scale("worker", 4) // finish sooner

	log := j.waitLog(co, "the final line", func(log string) bool { return finalRe.MatchString(log) })
	m := finalRe.FindStringSubmatch(log)
	must.Eq(t, strconv.Itoa(steps), m[1])
	must.Eq(t, want, m[2], must.Sprint("final parameters differ from the single-process run"))
	t.Logf("coordinator %s:\n%s", co, harness.Tail(log, 8))
}

// event waits for a task event containing substr on a stopped allocation
// whose name ends with suffix.
func (j *job) event(suffix, substr string) {
	j.t.Helper()
	harness.Eventually(j.t, time.Minute, func() error {
		allocs, _, err := j.c.Nomad.Jobs().Allocations(jobID, true, nil)
		if err != nil {
			return err
		}
		var seen []string
		for _, a := range allocs {
			if !strings.HasSuffix(a.Name, suffix) || a.DesiredStatus == "run" {
				continue
			}
			for _, e := range j.c.TaskEvents(j.t, a.ID, "ps") {
				if strings.Contains(e.DisplayMessage, substr) {
					return nil
				}
				seen = append(seen, e.DisplayMessage)
			}
		}
		return fmt.Errorf("no %q event on a stopped %s allocation; events: %q", substr, suffix, seen)
	})
}
