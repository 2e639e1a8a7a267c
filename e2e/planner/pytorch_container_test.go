package planner

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// pytorchQueues gives team A 3 of the cluster's 4 SIMULATED GPUs and team B
// 1: team B's 2-worker PyTorch job borrows one GPU while A is idle, and A's
// 3-worker job takes it back.
const pytorchQueues = `
queue "team-a" {
  namespaces = ["team-a"]
  guarantee  = 3
}
queue "team-b" {
  namespaces = ["team-b"]
  guarantee  = 1
}
`

// pytorchCompute is team B's MODELLED compute: 1 ms per sample of a rank's
// rows (128 ms a step for one worker, 64 ms for two), so a second worker
// speeds the job up, which the planner measures. The real work of a step
// (torch on CPU, gloo between containers, the reports) took about 17 ms at
// one rank and 40 ms at two here: at 0.2 ms per sample two workers measured
// slower than one (17-24 against 21-27 steps/s), and the planner rightly
// shrank the job it was expected to grow.
const pytorchCompute = "compute_per_sample=0.001"

// pytorchSteps is team B's length, and its reference's: long enough at
// about 7 steps/s (one worker) to 11 (two) that the job is still far from
// its end when team A's job has come and gone.
const pytorchSteps = 3000

// TestPlanner_PyTorchContainerJob: the planner manages the elastic PyTorch
// job as containers (jobspecs/train-pytorch-elastic.nomad.hcl, driver=docker, the
// image built from Debian's python3-torch, under the docker driver) as it does a
// host job. Team B's job (1 to 2 workers of one whole SIMULATED GPU each,
// gloo on CPU: the GPUs are simulated and the image's torch is CPU-only;
// MODELLED compute) grows to 2 into team A's idle GPU; team A submits a
// 3-worker host-process job and the planner shrinks B back to 1, its
// queue's share while A runs; when A ends the planner grows B again. Rank 0
// reports progress to the planner from inside the container, about once a
// second, so the planner measures the job's speed. The planner scales; the
// test only watches. The final evaluation loss
// matches an uninterrupted one-worker host run's within the host path's
// tolerance (not bit for bit: a changing world size changes the order of
// float sums). The time from each of the planner's scale-ups to the new
// worker's first step is logged (polled every 250 ms plus a CLI call).
func TestPlanner_PyTorchContainerJob(t *testing.T) {
	c := harness.Cluster(t)
	harness.RequireTorch(t)
	c.LoadImages(t)
	teamNamespaces(t, c)
	p := startPlanner(t, c, "pytorch-containers", pytorchQueues)
	p.waitLeading(t)
	run := time.Now().Unix() % 1000000

	// The reference: one uninterrupted host worker, not planner-managed, no GPU.
	refVars := c.PyTorchHostVars(fmt.Sprintf("ptc-ref-%d", run))
	for i, v := range refVars {
		if strings.HasPrefix(v, "steps=") {
			refVars[i] = "steps=" + strconv.Itoa(pytorchSteps)
		}
	}
	ref := c.RunJob(t, harness.PyTorchHostJobspec, refVars...)

	tB := time.Now()
	b := registerSpec(t, c, "train-pytorch-elastic.nomad.hcl", "team-b", fmt.Sprintf("ptc-b-%d", run),
		pytorchSteps, 1, 2, "driver=docker", "max_workers=2", "planner=true", "gpu_shares=4",
		"min_step_time=0", pytorchCompute)
	grow1 := b.scaleUpToFirstStep(uint64(tB.UnixNano()), nil, 2)
	t.Logf("the planner grew team B's PyTorch container job to 2 workers: %s", grow1)

	// Progress from rank 0 inside a container reaches the planner, often
	// enough for it to measure the job's speed.
	harness.Eventually(t, 3*time.Minute, func() error {
		jobs, err := p.jobs()
		if err != nil {
			return err
		}
		if v := jobs[b.id]; v.Model.StepsPerSec <= 0 {
			return fmt.Errorf("the planner has measured no speed of %s yet: %+v", b.id, v)
		}
		return nil
	})

	// Team A's 3-worker job: the planner reclaims B's borrowed GPU.
	a := submitElastic(t, c, "team-a", fmt.Sprintf("ptc-a-%d", run), 300, 3, 3, logEvery1)
	tA := time.Now()
	coA := a.coordinator(3 * time.Minute)
	_, seenA := a.waitLog(coA, firstStepRe, 3*time.Minute)
	must.Eq(t, 1, b.waitWorkers("1 while A runs", 2*time.Minute, func(n int) bool { return n == 1 }))
	var shrinks []string
	var shrunkAt uint64
	for _, ev := range b.plannerEvents() {
		if ev.Time >= uint64(tA.UnixNano()) && eventCount(ev) == 1 {
			shrinks = append(shrinks, ev.Message)
			shrunkAt = max(shrunkAt, ev.Time)
		}
	}
	must.SliceNotEmpty(t, shrinks, must.Sprint("no planner shrink of team B's PyTorch container job after A's submit"))
	t.Logf("the planner shrank team B's PyTorch container job to 1 worker for team A (%s); A's submit to its first step %s",
		strings.Join(shrinks, "; "), seenA.Sub(tA).Round(100*time.Millisecond))

	// A ends: the planner grows B again.
	// B's workers before the regrowth are those created before the shrink:
	// the planner may grow B (and Nomad place the new worker) before this
	// test sees A's final line, so a list taken then may hold the new one.
	a.waitLog(coA, finalLineRe, 3*time.Minute)
	before := map[string]bool{}
	for _, al := range b.allocs() {
		if uint64(al.CreateTime) <= shrunkAt {
			before[al.ID] = true
		}
	}
	grow2 := b.scaleUpToFirstStep(shrunkAt+1, before, 2)
	t.Logf("team A ended; the planner grew team B's PyTorch container job to 2 workers again: %s", grow2)

	got := b.pytorchFinal(6*time.Minute, 15*time.Minute)
	want := c.PyTorch(t, ref).Final(pytorchSteps)
	must.Eq(t, strconv.Itoa(pytorchSteps), got[1])
	gotLoss, wantLoss, diff, same := harness.LossDiff(t, got, want)
	t.Logf("team B's PyTorch container job ended at step %s: eval loss %.9f vs the uninterrupted host run's %.9f "+
		"(|diff| %.2g, tolerance %g); params equal bit for bit: %v",
		got[1], gotLoss, wantLoss, diff, harness.PyTorchLossTolerance, same)
}

// scaleUp is one planner scale-up of a PyTorch job, as the test saw it.
type scaleUp struct {
	event   nomadapi.ScalingEvent
	alloc   string        // the new worker's allocation
	toFirst time.Duration // the scaling event to the new worker's first step
}

func (s scaleUp) String() string {
	return fmt.Sprintf("scaling event %q to the new worker's first step (%s) %s",
		s.event.Message, s.alloc[:8], s.toFirst.Round(100*time.Millisecond))
}

// trainingFrom is a rank's line just before its first step of a group of W.
func trainingFrom(world int) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`(?m)^\[rank \d+/%d\] training from step=\d+`, world))
}

// scaleUpToFirstStep waits for the planner's scaling event of the worker
// group to `workers` at or after `after` (Nomad's event time, ns), then
// for a worker allocation not in old to log its first step in a group of
// that size.
func (j *nsJob) scaleUpToFirstStep(after uint64, old map[string]bool, workers int) scaleUp {
	j.t.Helper()
	var up scaleUp
	// Six minutes: on a loaded machine the first worker's container (torch's
	// import included) can take minutes to report the progress the planner
	// grows the job on.
	harness.Eventually(j.t, 6*time.Minute, func() error {
		var seen []string
		for _, ev := range j.plannerEvents() {
			if ev.Time >= after && eventCount(ev) == int64(workers) {
				up.event = ev
				return nil
			}
			seen = append(seen, fmt.Sprintf("event %q (count %d)", ev.Message, eventCount(ev)))
		}
		for _, a := range j.allocs() {
			seen = append(seen, fmt.Sprintf("%s %s (%s/%s): %s", a.TaskGroup, a.ID[:8], a.DesiredStatus, a.ClientStatus,
				harness.Tail(j.taskLog(a.ID, harness.PyTorchTask), 2)))
		}
		return fmt.Errorf("%s/%s: no planner scale-up to %d yet:\n%s", j.ns, j.id, workers, strings.Join(seen, "\n"))
	})
	first := trainingFrom(workers)
	harness.Eventually(j.t, 3*time.Minute, func() error {
		var seen []string
		for _, a := range j.allocs() {
			if a.TaskGroup != harness.PyTorchWorkerGroup {
				continue
			}
			out := j.taskLog(a.ID, harness.PyTorchTask)
			if !old[a.ID] && a.ClientStatus == nomadapi.AllocClientStatusRunning && first.MatchString(out) {
				up.alloc = a.ID
				return nil
			}
			seen = append(seen, fmt.Sprintf("%s (%s/%s, old %v): %s", a.ID[:8], a.DesiredStatus, a.ClientStatus, old[a.ID], harness.Tail(out, 2)))
		}
		return fmt.Errorf("%s/%s: no new worker training in a group of %d yet; workers:\n%s",
			j.ns, j.id, workers, strings.Join(seen, "\n"))
	})
	up.toFirst = time.Since(time.Unix(0, int64(up.event.Time)))
	return up
}

// pytorchFinal waits for the final line of a PyTorch job's rank 0 (in
// whichever worker allocation holds it) and returns its submatches. It
// waits while the job makes progress: it fails when no rank's logged step
// has advanced for stall, or after limit in all (on a loaded machine the
// real torch work of a step takes several times as long as on an idle one).
func (j *nsJob) pytorchFinal(stall, limit time.Duration) []string {
	j.t.Helper()
	var final []string
	best, advanced := int64(-1), time.Now()
	stepRe := regexp.MustCompile(`(?m)^step=(\d+) `)
	harness.Eventually(j.t, limit, func() error {
		var tails []string
		for _, a := range j.allocs() {
			if a.TaskGroup != harness.PyTorchWorkerGroup {
				continue
			}
			out := j.taskLog(a.ID, harness.PyTorchTask)
			if final = harness.PyTorchFinal.FindStringSubmatch(out); final != nil {
				return nil
			}
			for _, m := range stepRe.FindAllStringSubmatch(out, -1) {
				if n, _ := strconv.ParseInt(m[1], 10, 64); n > best {
					best, advanced = n, time.Now()
				}
			}
			tails = append(tails, a.ID[:8]+": "+harness.Tail(out, 3))
		}
		if time.Since(advanced) > stall {
			j.t.Fatalf("%s/%s: no step past %d for %s, and no final line:\n%s", j.ns, j.id, best, stall, strings.Join(tails, "\n"))
		}
		return fmt.Errorf("%s/%s: no final line yet (step %d):\n%s", j.ns, j.id, best, strings.Join(tails, "\n"))
	})
	return final
}
