package simulator

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/queue"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/caravan-nomad/caravan/planner/simulator/philly"
	"github.com/caravan-nomad/caravan/planner/simulator/pollux"
	"github.com/caravan-nomad/caravan/planner/simulator/steps"
)

// twoTeams is two queues of 2 GPUs each on a 4-GPU cluster; strict gives
// team b no borrowing.
func twoTeams(strict bool) queue.Config {
	c := queue.Config{Queues: []queue.Queue{
		{Name: "a", Namespaces: []string{"a"}, Guarantee: 2 * policy.MilliGPU, BorrowLimit: queue.Unlimited, LendLimit: queue.Unlimited, Weight: 1},
		{Name: "b", Namespaces: []string{"b"}, Guarantee: 2 * policy.MilliGPU, BorrowLimit: queue.Unlimited, LendLimit: queue.Unlimited, Weight: 1},
	}}
	if strict {
		c.Queues[1].BorrowLimit = 0
	}
	return c
}

// TestReplayPhillyQueues_Engine: the --philly engine with queues. Team b
// submits two 10 h jobs of 2 GPUs at 07:00, team a one 1 h job at 08:00.
// Without queues a's job waits for b's; with queues b's borrower is
// suspended for a and resumes after; under a strict quota b's second job
// waits from the start.
func TestReplayPhilly_Queues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "philly.csv")
	must.NoError(t, os.WriteFile(path, []byte("timestamp,duration,num_gpus,gpu_time,cluster\n"+
		"2017-10-09 07:00:00,36000,2,72000,b\n2017-10-09 07:00:00,36000,2,72000,b\n2017-10-09 08:00:00,3600,2,7200,a\n"), 0o644))
	cfg := engine.Config{Nodes: 1, GPUsPerNode: 4}
	plain, err := philly.ReplayPhilly(cfg, "fifo", path)
	must.NoError(t, err)
	must.Eq(t, 0, plain.Restarts)
	must.Between(t, 36000, plain.AvgJCT, 36000+600) // a: 9 h wait + 1 h
	cfg.Queues = twoTeams(false)
	rc, err := philly.ReplayPhilly(cfg, "fifo", path)
	must.NoError(t, err)
	must.Eq(t, 1, rc.Restarts)                                  // b's borrower resumed once
	must.Between(t, (36000+3600+39600)/3, rc.AvgJCT, 27000+600) // a: 1 h; b's second: 10 h + 1 h suspended
	cfg.Queues = twoTeams(true)
	strict, err := philly.ReplayPhilly(cfg, "fifo", path)
	must.NoError(t, err)
	must.Eq(t, 0, strict.Restarts)
	must.Between(t, (36000+72000+3600)/3, strict.AvgJCT, (36000+72000+3600)/3+600)
}

// TestSimulateSteps_Queues: the step engine (the live loop's model) with
// queues: b's 4-worker gang borrows a's idle GPUs; when a's job arrives
// the gang is suspended for it and resumes when it is done.
func TestSimulateSteps_Queues(t *testing.T) {
	cfg := steps.StepConfig{Nodes: 2, GPUsPerNode: 2, WorkerMilliGPU: 1000, MaxWorkers: 4, Interval: 10, Cooldown: 30,
		StartDelay: 5, ResizeDelay: 5, ResumeDelay: 10, RestartCost: 30}
	jobs := []steps.StepJob{
		{Name: "b1", Namespace: "b", Steps: 20000, Requested: 4, Batch: 64, MicroShards: 8, ComputePerSample: 0.001},
		{Name: "a1", Namespace: "a", Submitted: 100, Steps: 2000, Requested: 2, Batch: 64, MicroShards: 8, ComputePerSample: 0.001},
	}
	plain, err := steps.SimulateSteps(cfg, "fifo", jobs)
	must.NoError(t, err)
	cfg.Queues = twoTeams(false)
	rc, err := steps.SimulateSteps(cfg, "fifo", jobs)
	must.NoError(t, err)
	jct := func(r engine.Result, name string) float64 {
		for _, j := range r.Jobs {
			if j.Name == name {
				return j.JCT
			}
		}
		t.Fatalf("no job %s", name)
		return 0
	}
	must.Greater(t, jct(plain, "b1")-100, jct(plain, "a1")) // a waited for b's gang
	must.Less(t, 200, jct(rc, "a1"))                        // a started within a round or two
	must.Eq(t, 0, plain.Restarts)
	must.Eq(t, 1, rc.Restarts) // b's gang resumed once
}

// TestSimulate_QueuesCapEachTeam: the Pollux replay engine with strict
// queues (no borrowing): in every round each namespace holds at most its
// guarantee, and the replay completes; the jobs alternate between the
// two namespaces.
func TestSimulate_QueuesCapEachTeam(t *testing.T) {
	dir := sharedData(t)
	jobs, apps := smallWorkload(t, dir, 8)
	cfg := engine.Config{Nodes: 4, GPUsPerNode: 4, Record: true, Namespaces: map[string]string{}}
	cfg.Queues = queue.Config{Queues: []queue.Queue{
		{Name: "a", Namespaces: []string{"a"}, Guarantee: 8 * policy.MilliGPU, BorrowLimit: 0, LendLimit: queue.Unlimited, Weight: 1},
		{Name: "b", Namespaces: []string{"b"}, Guarantee: 8 * policy.MilliGPU, BorrowLimit: 0, LendLimit: queue.Unlimited, Weight: 1},
	}}
	for i, j := range jobs {
		cfg.Namespaces[j.Name] = []string{"a", "b"}[i%2]
	}
	for _, p := range []string{"optimus", "goodput"} {
		res, err := pollux.Simulate(cfg, p, jobs, apps)
		must.NoError(t, err, must.Sprint(p))
		must.SliceLen(t, len(jobs), res.Jobs)
		for _, tr := range res.Trace {
			held := map[string]int{}
			for i, n := range tr.GPUs {
				held[cfg.Namespaces[jobs[i].Name]] += n
			}
			must.LessEq(t, 8, held["a"], must.Sprintf("%s at %v", p, tr.Time))
			must.LessEq(t, 8, held["b"], must.Sprintf("%s at %v", p, tr.Time))
		}
	}
}
