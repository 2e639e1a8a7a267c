package planner

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// TestPlanner_ContainerJob: the planner manages a container job as it does
// a host job. Team B's elastic job runs as containers under Nomad's docker
// driver (jobspecs/train-elastic.nomad.hcl, driver=docker); past 2 workers (one GPU
// each) it spans both clients, so both runtimes at once: dockerd on
// client1, podman's Docker-compatible API on client2
// (TestPlanner_PyTorchContainerJob runs the PyTorch container job). It
// grows past its 2-GPU guarantee into team A's idle GPUs, shrinks back when
// team A submits a 2-worker host-process job, grows again when A ends, and
// finishes with the parameters of one uninterrupted process. Nothing in the
// planner looks at the task driver: it scales groups. SIMULATED GPUs;
// MODELLED compute (1 ms per sample sleeps).
func TestPlanner_ContainerJob(t *testing.T) {
	c := harness.Cluster(t)
	c.LoadImages(t)
	teamNamespaces(t, c)
	p := startPlanner(t, c, "containers", queuesConfig)
	p.waitLeading(t)
	run := time.Now().Unix() % 1000000

	const stepsB = 5000
	want := harness.ElasticReference(t, stepsB)
	b := submitSpec(t, c, "train-elastic.nomad.hcl", "team-b", fmt.Sprintf("ctr-b-%d", run), stepsB, 1, 4, "driver=docker")
	coB := b.coordinator(2 * time.Minute)
	grown := b.waitWorkers("more than its 2-GPU guarantee", 3*time.Minute, func(n int) bool { return n > 2 })
	t.Logf("team B's container job grew to %d workers (GPUs), past its guarantee of 2", grown)

	a := submitElastic(t, c, "team-a", fmt.Sprintf("ctr-a-%d", run), 200, 2, 2, `trainer_args=["-log-every","1"]`)
	tA := time.Now()
	coA := a.coordinator(3 * time.Minute)
	a.waitLog(coA, firstStepRe, 2*time.Minute)
	must.LessEq(t, 2, b.running(), must.Sprint("team B's container job still holds A's GPUs while A runs"))
	var shrinks []string
	for _, ev := range b.plannerEvents() {
		if ev.Time >= uint64(tA.UnixNano()) && eventCount(ev) >= 0 && eventCount(ev) <= 2 {
			shrinks = append(shrinks, fmt.Sprintf("to %d: %s", eventCount(ev), ev.Message))
		}
	}
	must.SliceNotEmpty(t, shrinks, must.Sprint("no planner shrink of team B's container job after A's submit"))
	t.Logf("the planner shrank team B's container job: %s", strings.Join(shrinks, "; "))

	a.waitLog(coA, finalLineRe, 2*time.Minute)
	regrown := b.waitWorkers("more than 2 again", 3*time.Minute, func(n int) bool { return n > 2 })
	t.Logf("team A's job ended; team B's container job grew back to %d workers", regrown)
	log, _ := b.waitLog(coB, finalLineRe, 4*time.Minute)
	m := finalLineRe.FindStringSubmatch(log)
	must.Eq(t, strconv.Itoa(stepsB), m[1])
	must.Eq(t, want, m[2], must.Sprint("team B's final parameters differ from one uninterrupted process"))
}
