package steps

import (
	"math"
	"testing"

	"github.com/shoenig/test/must"
)

func TestStepTime(t *testing.T) {
	j := StepJob{Batch: 64, MicroShards: 8, ComputePerSample: 0.001}
	cases := []struct {
		workers int
		want    float64
	}{
		{0, 0}, {1, 0.064 + 0.01}, {2, 0.032 + 0.01}, {3, 0.024 + 0.01}, {4, 0.016 + 0.01}, {8, 0.008 + 0.01}, {16, 0.008 + 0.01},
	}
	for _, tc := range cases {
		must.Eq(t, math.Round(tc.want*1e9), math.Round(j.StepTime(tc.workers, 0.01)*1e9), must.Sprintf("%d workers", tc.workers))
	}
}

func TestSimulateSteps(t *testing.T) {
	cfg := StepConfig{Nodes: 2, GPUsPerNode: 2, WorkerMilliGPU: 1000, MaxWorkers: 4, Interval: 10, Cooldown: 30,
		StartDelay: 5, ResizeDelay: 5, ResumeDelay: 10, RestartCost: 30}
	// One job alone: 1000 steps of 64 ms on one worker.
	alone := []StepJob{{Name: "a", Steps: 1000, Requested: 1, Batch: 64, MicroShards: 8, ComputePerSample: 0.001}}
	fifo, err := SimulateSteps(cfg, "fifo", alone)
	must.NoError(t, err)
	must.Between(t, 5+64-1, fifo.AvgJCT, 5+64+1)
	must.Eq(t, 0, fifo.Restarts)
	// Optimus grows a longer job onto the idle GPUs once its speed is
	// known, one doubling at a time (the exploration rule): each step must
	// repay a restart, which a 69 s job cannot.
	long := []StepJob{alone[0]}
	long[0].Steps = 3000
	lf, err := SimulateSteps(cfg, "fifo", long)
	must.NoError(t, err)
	opt, err := SimulateSteps(cfg, "optimus", long)
	must.NoError(t, err)
	must.Less(t, lf.AvgJCT*0.7, opt.AvgJCT)

	// Three one-worker jobs arriving together on four GPUs: FIFO leaves one idle.
	three := []StepJob{alone[0], alone[0], alone[0]}
	three[1].Name, three[2].Name = "b", "c"
	f3, err := SimulateSteps(cfg, "fifo", three)
	must.NoError(t, err)
	must.Between(t, 5+64-1, f3.AvgJCT, 5+64+1)
	must.Between(t, 0.74, f3.GPUUtil, 0.76)
	must.Len(t, 3, f3.Jobs)

	// Without a planner the simulated Nomad places workers one by one as
	// GPUs free up: a four-worker job beside a one-worker job starts with
	// three; a later job waits for a free GPU.
	big := StepJob{Name: "big", Steps: 1000, Requested: 4, Batch: 64, MicroShards: 8, ComputePerSample: 0.001}
	mixed := []StepJob{three[0], big, three[1]}
	mixed[2].Submitted = 1
	none, err := SimulateSteps(cfg, NoPlanner, mixed)
	must.NoError(t, err)
	must.Between(t, 5+64-1, none.Jobs[0].JCT, 5+64+1)
	must.Less(t, 5+64.0/2, none.Jobs[1].JCT)
	must.Greater(t, 5+64+5.0, none.Jobs[2].JCT) // waited for big
	must.Eq(t, "", none.Policy)

	_, err = SimulateSteps(cfg, "no-such-policy", alone)
	must.Error(t, err)
}

// TestSimulateStepsMeasuresLikeTheLivePlanner: the live planner grows a
// job only once it has measured its speed, from two progress reports
// received after the round that first saw its shape steady; a job that
// reports every 500 steps (a 32 s gap at one worker) is measured much
// later than one that reports every 10, and is grown later.
func TestSimulateStepsMeasuresLikeTheLivePlanner(t *testing.T) {
	cfg := StepConfig{Nodes: 2, GPUsPerNode: 2, WorkerMilliGPU: 1000, MaxWorkers: 4, Interval: 5, Cooldown: 15,
		StartDelay: 1, ResizeDelay: 1, ResumeDelay: 1, RestartCost: 30, ResizeCost: 2}
	job := []StepJob{{Name: "a", Steps: 3000, Requested: 1, Batch: 64, MicroShards: 8, ComputePerSample: 0.001}}
	jct := map[int]float64{}
	for _, every := range []int{10, 500} {
		cfg.ReportSteps = every
		r, err := SimulateSteps(cfg, "optimus", job)
		must.NoError(t, err)
		jct[every] = r.AvgJCT
	}
	// 3000 steps: 64 ms each on one worker (192 s), 16 ms on four.
	must.Less(t, 150, jct[10])
	must.Less(t, jct[500]-20, jct[10], must.Sprintf("JCTs by report gap %v", jct))
	t.Logf("JCTs by report gap %v", jct)
}
