package harness

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

	"github.com/caravan-nomad/caravan/trainer"
)

var (
	// ElasticStepRe matches the coordinator's progress lines.
	ElasticStepRe = regexp.MustCompile(`(?m)^step=(\d+) .*workers=(\d+) ps=(\d+)(?: grad_sqr=\S+ grad_var=\S+)?$`)
	// ElasticFinalRe matches its final line: the step and the parameters' hash.
	ElasticFinalRe = regexp.MustCompile(`final step=(\d+) .* params_sha256=([0-9a-f]{64})`)
)

// ElasticReference is the parameters' hash of a single-process, in-process
// run of the reference trainer's default configuration for steps steps:
// what an elastic job of the same configuration must end with.
func ElasticReference(t testing.TB, steps uint64) string {
	t.Helper()
	c := trainer.DefaultConfig()
	c.Steps, c.LogEvery = steps, 0
	res, err := trainer.Run(context.Background(), c, trainer.Options{})
	if err != nil {
		t.Fatalf("harness: reference run: %v", err)
	}
	return res.Hash
}

// Elastic drives a running train-elastic job (jobspecs/train-elastic*.nomad.hcl):
// its "ps" group (the coordinator is ps[0], whose task "ps" logs the
// progress) and its "worker" group.
type Elastic struct {
	T  testing.TB
	C  *C
	ID string
}

// Scale sets a group's count with `nomad job scale -detach`.
func (j *Elastic) Scale(group string, n int) {
	j.T.Helper()
	if _, err := j.C.CLI(j.T, "job", "scale", "-detach", j.ID, group, strconv.Itoa(n)); err != nil {
		j.T.Fatalf("harness: %v", err)
	}
}

// Coordinator waits for the running parameter server of index 0 that is
// not in old, and returns its ID.
func (j *Elastic) Coordinator(old map[string]bool) string {
	j.T.Helper()
	var id string
	j.C.WaitAllocs(j.T, j.ID, 3*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
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

// Log is the coordinator's stdout (empty while it cannot be read).
func (j *Elastic) Log(alloc string) string {
	log, _ := j.C.CLI(j.T, "alloc", "logs", alloc, "ps")
	return log
}

// WaitLog waits until the coordinator's log satisfies ok, and returns it.
func (j *Elastic) WaitLog(alloc, what string, ok func(log string) bool) string {
	j.T.Helper()
	var log string
	Eventually(j.T, 3*time.Minute, func() error {
		if log = j.Log(alloc); !ok(log) {
			return fmt.Errorf("waiting for %s in the log of %s:\n%s", what, alloc, Tail(log, 8))
		}
		return nil
	})
	return log
}

// WaitShape waits for a progress line with these workers and servers,
// after the current end of the log.
func (j *Elastic) WaitShape(alloc string, workers, ps int) {
	j.T.Helper()
	from := len(j.Log(alloc))
	j.WaitLog(alloc, fmt.Sprintf("workers=%d ps=%d", workers, ps), func(log string) bool {
		for _, m := range ElasticStepRe.FindAllStringSubmatch(log[min(from, len(log)):], -1) {
			if m[2] == strconv.Itoa(workers) && m[3] == strconv.Itoa(ps) {
				return true
			}
		}
		return false
	})
}

// AllStopped waits until no allocation of the job runs or is pending.
func (j *Elastic) AllStopped() {
	j.T.Helper()
	j.C.WaitAllocs(j.T, j.ID, 3*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		for _, a := range as {
			if a.ClientStatus == "running" || a.ClientStatus == "pending" {
				return false
			}
		}
		return true
	})
}

// Event waits for an event of task containing substr on a stopped
// allocation whose name ends with suffix (".ps[0]").
func (j *Elastic) Event(suffix, task, substr string) {
	j.T.Helper()
	Eventually(j.T, time.Minute, func() error {
		allocs, _, err := j.C.Nomad.Jobs().Allocations(j.ID, true, nil)
		if err != nil {
			return err
		}
		var seen []string
		for _, a := range allocs {
			if !strings.HasSuffix(a.Name, suffix) || a.DesiredStatus == "run" {
				continue
			}
			for _, e := range j.C.TaskEvents(j.T, a.ID, task) {
				if strings.Contains(e.DisplayMessage, substr) {
					return nil
				}
				seen = append(seen, e.DisplayMessage)
			}
		}
		return fmt.Errorf("no %q event of task %s on a stopped %s allocation; events: %q", substr, task, suffix, seen)
	})
}

// Reshape runs the scale sequence every elastic test starts with, from 1
// server and 1 worker: workers 1 -> 3 -> 2, then servers 1 -> 2 (the
// coordinator co logs "resharded"), each shape awaited at co.
func (j *Elastic) Reshape(co string) {
	j.T.Helper()
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
		j.T.Logf("scale %s to %d", s.group, s.n)
		j.Scale(s.group, s.n)
		j.WaitShape(co, s.workers, s.ps)
		must.StrContains(j.T, j.Log(co), s.mustContain)
	}
}

// Suspend scales both groups to 0 and waits until every allocation has
// stopped and coordinator co logged its checkpoint. Task saver's events
// then say saved on ps[0] and "Checkpoint not needed" on ps[1]: the second
// server answered the checkpoint request with a skip marker, since the
// coordinator writes the whole state.
func (j *Elastic) Suspend(co, saver, saved string) {
	j.T.Helper()
	j.T.Log("suspend: both groups to 0")
	j.Scale("worker", 0)
	j.Scale("ps", 0)
	j.AllStopped()
	must.StrContains(j.T, j.Log(co), "checkpoint step=")
	j.Event(".ps[0]", saver, saved)
	j.Event(".ps[1]", saver, "Checkpoint not needed")
}

// Final waits for the coordinator's final line and returns its step and
// parameters' hash.
func (j *Elastic) Final(alloc string) (step, hash, log string) {
	j.T.Helper()
	log = j.WaitLog(alloc, "the final line", func(log string) bool { return ElasticFinalRe.MatchString(log) })
	m := ElasticFinalRe.FindStringSubmatch(log)
	return m[1], m[2], log
}
