package planner

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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

// queuesConfig gives each team a 2-GPU guarantee on the 4-GPU cluster
// (2 clients x 2 SIMULATED GPUs).
const queuesConfig = `
queue "team-a" {
  namespaces = ["team-a"]
  guarantee  = 2
}
queue "team-b" {
  namespaces = ["team-b"]
  guarantee  = 2
}
`

var (
	firstStepRe = regexp.MustCompile(`(?m)^step=\d+ `)
	finalLineRe = regexp.MustCompile(`final step=(\d+) .* params_sha256=([0-9a-f]{64})`)
)

// nsJob is a train-elastic job (jobspecs/train-elastic.nomad.hcl) in a
// team's namespace.
type nsJob struct {
	t      *testing.T
	c      *harness.C
	ns, id string
}

// submitElastic renders train-elastic with vars, puts it in namespace ns
// with worker bounds [lo, hi] (one whole simulated GPU per worker) and
// registers it. It is stopped and purged when the test ends.
func submitElastic(t *testing.T, c *harness.C, ns, id string, steps, lo, hi int, vars ...string) *nsJob {
	t.Helper()
	vars = append([]string{"caravan_bin=" + c.Bin, "checkpoint_interval="}, vars...)
	return submitSpec(t, c, "train-elastic.nomad.hcl", ns, id, steps, lo, hi, vars...)
}

// submitSpec is submitElastic for a train-elastic jobspec of jobspecs/
// with other variables (driver=docker), with only the variables all of
// them declare.
func submitSpec(t *testing.T, c *harness.C, spec, ns, id string, steps, lo, hi int, vars ...string) *nsJob {
	t.Helper()
	return registerSpec(t, c, spec, ns, id, steps, lo, hi, append([]string{"compute_per_sample=1ms", "shares=4"}, vars...)...)
}

// registerSpec renders jobspecs/spec with its name, lo workers, steps and
// vars, puts it in namespace ns with worker bounds [lo, hi] and registers
// it. It is stopped and purged when the test ends.
func registerSpec(t *testing.T, c *harness.C, spec, ns, id string, steps, lo, hi int, vars ...string) *nsJob {
	t.Helper()
	args := []string{"job", "run", "-output", "-var", "name=" + id,
		"-var", fmt.Sprintf("workers=%d", lo), "-var", fmt.Sprintf("steps=%d", steps)}
	for _, v := range vars {
		args = append(args, "-var", v)
	}
	out, err := c.CLI(t, append(args, filepath.Join(c.Root, "jobspecs", spec))...)
	must.NoError(t, err)
	var doc struct{ Job nomadapi.Job }
	must.NoError(t, json.Unmarshal([]byte(out), &doc))
	job := &doc.Job
	job.Namespace = &ns
	job.Meta["caravan_min_workers"] = strconv.Itoa(lo)
	job.Meta["caravan_max_workers"] = strconv.Itoa(hi)
	_ = os.RemoveAll(filepath.Join(c.CheckpointDir, ns, id))
	_, _, err = c.Nomad.Jobs().Register(job, &nomadapi.WriteOptions{Namespace: ns})
	must.NoError(t, err)
	j := &nsJob{t: t, c: c, ns: ns, id: id}
	t.Cleanup(j.purge)
	return j
}

func (j *nsJob) purge() {
	w := &nomadapi.WriteOptions{Namespace: j.ns}
	if _, _, err := j.c.Nomad.Jobs().Deregister(j.id, false, w); err != nil {
		var resp nomadapi.UnexpectedResponseError
		if !errors.As(err, &resp) || resp.StatusCode() != http.StatusNotFound {
			j.t.Logf("stopping %s/%s: %v", j.ns, j.id, err)
		}
		return
	}
	_ = waitFor(time.Minute, func() bool { return j.live("") == 0 })
	_, _, _ = j.c.Nomad.Jobs().Deregister(j.id, true, w)
}

func waitFor(d time.Duration, ok func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if ok() {
			return true
		}
	}
	return false
}

func (j *nsJob) allocs() []*nomadapi.AllocationListStub {
	as, _, err := j.c.Nomad.Jobs().Allocations(j.id, true, &nomadapi.QueryOptions{Namespace: j.ns})
	if err != nil {
		return nil
	}
	return as
}

// live counts the job's running or pending allocations of group ("" any).
func (j *nsJob) live(group string) int {
	n := 0
	for _, a := range j.allocs() {
		if (group == "" || a.TaskGroup == group) && a.DesiredStatus == "run" &&
			(a.ClientStatus == "running" || a.ClientStatus == "pending") {
			n++
		}
	}
	return n
}

// running counts the job's running worker allocations.
func (j *nsJob) running() int {
	n := 0
	for _, a := range j.allocs() {
		if a.TaskGroup == "worker" && a.DesiredStatus == "run" && a.ClientStatus == "running" {
			n++
		}
	}
	return n
}

// coordinator waits for the running parameter server of index 0.
func (j *nsJob) coordinator(timeout time.Duration) string {
	j.t.Helper()
	var id string
	harness.Eventually(j.t, timeout, func() error {
		for _, a := range j.allocs() {
			if strings.HasSuffix(a.Name, ".ps[0]") && a.DesiredStatus == "run" && a.ClientStatus == "running" {
				id = a.ID
				return nil
			}
		}
		return fmt.Errorf("%s/%s: no running coordinator yet", j.ns, j.id)
	})
	return id
}

func (j *nsJob) log(alloc string) string { return j.taskLog(alloc, "ps") }

// taskLog is the stdout of one task of an allocation ("" until it starts).
func (j *nsJob) taskLog(alloc, task string) string {
	out, _ := j.c.CLI(j.t, "alloc", "logs", "-namespace", j.ns, alloc, task)
	return out
}

// waitLog polls the coordinator's log until re matches, and returns the
// time it first saw the match.
func (j *nsJob) waitLog(alloc string, re *regexp.Regexp, timeout time.Duration) (string, time.Time) {
	j.t.Helper()
	var log string
	harness.Eventually(j.t, timeout, func() error {
		if log = j.log(alloc); !re.MatchString(log) {
			return fmt.Errorf("%s/%s: waiting for %s in:\n%s", j.ns, j.id, re, harness.Tail(log, 6))
		}
		return nil
	})
	return log, time.Now()
}

// waitWorkers waits until ok holds for the running worker count.
func (j *nsJob) waitWorkers(what string, timeout time.Duration, ok func(int) bool) int {
	j.t.Helper()
	var n int
	harness.Eventually(j.t, timeout, func() error {
		if n = j.running(); !ok(n) {
			return fmt.Errorf("%s/%s: %d running workers, want %s", j.ns, j.id, n, what)
		}
		return nil
	})
	return n
}

// plannerEvents are the planner's scaling events on the job's worker group.
func (j *nsJob) plannerEvents() []nomadapi.ScalingEvent {
	st, _, err := j.c.Nomad.Jobs().ScaleStatus(j.id, &nomadapi.QueryOptions{Namespace: j.ns})
	must.NoError(j.t, err)
	var out []nomadapi.ScalingEvent
	for _, ev := range st.TaskGroups["worker"].Events {
		if strings.HasPrefix(ev.Message, "caravan planner:") {
			out = append(out, ev)
		}
	}
	return out
}

// TestPlanner_QueueReclaim: team queues on the real cluster. Two namespaces
// with a 2-GPU guarantee each on 4 SIMULATED GPUs; team B's elastic job
// grows past its guarantee into A's idle GPUs; team A submits a 2-worker job (minimum 2);
// the planner shrinks B back to its guarantee (a scale: workers hold no
// state, the coordinator keeps the model) and A starts. Reclaim time (A's
// submit to A's first step) is logged beside a plain start on the idle
// cluster in the same run. When A ends, B grows again and finishes with the
// parameters of one uninterrupted process. Compute is MODELLED (1 ms per
// sample sleeps).
func TestPlanner_QueueReclaim(t *testing.T) {
	c := harness.Cluster(t)
	teamNamespaces(t, c)
	// The e2e cluster runs without ACLs: the planner's shipped policy must
	// reach the teams' namespaces by its text.
	pol := readFile(t, filepath.Join(c.Root, "jobspecs", "acl", "planner-nomad.policy.hcl"))
	must.StrContains(t, pol, `namespace "*"`, must.Sprint("the planner's policy must cover every namespace it manages"))

	p := startPlanner(t, c, "queues", queuesConfig)
	p.waitLeading(t)
	run := time.Now().Unix() % 1000000

	// A plain start on the idle cluster: submit to first step.
	plainStart := plainStartTime(t, c, fmt.Sprintf("qplain-%d", run))

	// Team B borrows A's idle GPUs.
	const stepsB = 5000
	want := referenceHash(stepsB)
	b := submitElastic(t, c, "team-b", fmt.Sprintf("qb-%d", run), stepsB, 1, 4)
	coB := b.coordinator(time.Minute)
	grown := b.waitWorkers("more than its 2-GPU guarantee", 2*time.Minute, func(n int) bool { return n > 2 })
	t.Logf("team B's job grew to %d workers (GPUs), past its guarantee of 2", grown)

	// Team A submits a 2-worker job (minimum 2): B's borrowed GPUs are reclaimed.
	a := submitElastic(t, c, "team-a", fmt.Sprintf("qa-%d", run), 200, 2, 2, logEvery1)
	tA := time.Now()
	coA := a.coordinator(2 * time.Minute)
	_, seen := a.waitLog(coA, firstStepRe, 2*time.Minute)
	reclaim := seen.Sub(tA)
	shrunk := b.running()
	must.LessEq(t, 2, shrunk, must.Sprint("team B still holds A's GPUs while A runs"))
	var reasons []string
	for _, ev := range b.plannerEvents() {
		if ev.Time >= uint64(tA.UnixNano()) {
			n := eventCount(ev)
			reasons = append(reasons, fmt.Sprintf("to %d: %s", n, ev.Message))
		}
	}
	must.SliceNotEmpty(t, reasons, must.Sprint("no planner scaling event on team B's job after A's submit"))
	must.SliceNotEmpty(t, b.reclaimEvents("worker", "team-a"), must.Sprint("team B's shrink does not name team-a (meta caravan_reclaimed_by)"))
	t.Logf("reclaim: team A's submit to its first step %s (team B shrunk to %d workers: %s); plain start on the idle cluster %s",
		reclaim.Round(100*time.Millisecond), shrunk, strings.Join(reasons, "; "), plainStart.Round(100*time.Millisecond))

	// A ends; B grows again and ends bit for bit.
	a.waitLog(coA, finalLineRe, 2*time.Minute)
	regrown := b.waitWorkers("more than 2 again", 2*time.Minute, func(n int) bool { return n > 2 })
	t.Logf("team A's job ended; team B's job grew back to %d workers", regrown)
	log, _ := b.waitLog(coB, finalLineRe, 3*time.Minute)
	m := finalLineRe.FindStringSubmatch(log)
	must.Eq(t, strconv.Itoa(stepsB), m[1])
	must.Eq(t, <-want, m[2], must.Sprint("team B's final parameters differ from one uninterrupted process"))
	t.Logf("team B ended at step %s, params_sha256 %s… equal to the uninterrupted run", m[1], m[2][:16])
}
