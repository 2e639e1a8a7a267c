package queue

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/policy"
)

// rankInput: one queue of 2 GPUs on a 2-GPU cluster, two waiting 2-GPU
// gangs: "old", submitted first with 20 GPU-hours attained (past
// Tiresias's 16 h threshold), and "new", submitted an hour later with
// none.
func rankInput() (Config, policy.Input, []Job) {
	c := Config{Queues: []Queue{q("a", 2*g, "team-a")}}
	in := policy.Input{Now: t0.Add(2 * time.Hour), Cluster: policy.Cluster{Nodes: []policy.Node{{ID: "n0", GPUs: 2}}}}
	for _, j := range []struct {
		id       string
		at       time.Duration
		attained float64
	}{{"old", 0, 20 * 3600}, {"new", time.Hour, 0}} {
		in.Jobs = append(in.Jobs, policy.Job{ID: j.id, Submitted: t0.Add(j.at), Min: 2, Max: 2, Gang: true,
			Worker: policy.Demand{GPUMilli: g}, AttainedService: j.attained})
	}
	jobs := make([]Job, len(in.Jobs))
	for i := range in.Jobs {
		jobs[i] = FromPolicy(&in.Jobs[i], "team-a", "")
	}
	return c, in, jobs
}

// TestPlan_RankIsThePolicyOrder: inside a queue, after Nomad priority,
// jobs are admitted in the active policy's order: FIFO admits the older
// job, Tiresias (least attained service) the newer one, unless the older
// one has the higher Nomad priority.
func TestPlan_RankIsThePolicyOrder(t *testing.T) {
	admitted := func(t *testing.T, p policy.Policy, prio map[string]int) string {
		t.Helper()
		c, in, jobs := rankInput()
		for i := range jobs {
			jobs[i].Priority = prio[jobs[i].ID]
		}
		r, plan, err := Plan(p, c, in, jobs)
		must.NoError(t, err)
		who := ""
		for i, d := range r.Jobs {
			if d.Admit {
				must.Eq(t, "", who, must.Sprint("one job fits"))
				who = d.ID
				must.Eq(t, 2, plan.Jobs[i].Workers)
			} else {
				must.Eq(t, 0, plan.Jobs[i].Workers)
				must.StrContains(t, plan.Jobs[i].Reason, "queue a: queued in a")
			}
		}
		return who
	}
	must.Eq(t, "old", admitted(t, policy.NewFIFO(), nil))
	must.Eq(t, "new", admitted(t, policy.NewTiresias(), nil))
	must.Eq(t, "old", admitted(t, policy.NewTiresias(), map[string]int{"old": 60, "new": 50}))
}

// TestSetRanks: a policy without an order of its own leaves the ranks
// alone; Tiresias ranks its low queue after its high one.
func TestSetRanks(t *testing.T) {
	_, in, jobs := rankInput()
	opt, err := policy.New("optimus")
	must.NoError(t, err)
	SetRanks(opt, in, jobs)
	must.Eq(t, []float64{0, 0}, []float64{jobs[0].Rank, jobs[1].Rank})
	SetRanks(policy.NewTiresias(), in, jobs)
	must.Eq(t, []float64{1, 0}, []float64{jobs[0].Rank, jobs[1].Rank})
}

func TestProgressLost(t *testing.T) {
	cases := []struct {
		name string
		j    Job
		want time.Duration
	}{
		{"no checkpoint known: since resume", Job{SinceResume: 10 * time.Minute, SinceCheckpoint: time.Minute}, 10 * time.Minute},
		{"checkpoint since the resume", Job{SinceResume: 10 * time.Minute, SinceCheckpoint: time.Minute, CheckpointKnown: true}, time.Minute},
		{"checkpoint before the resume: resumed from it", Job{SinceResume: time.Minute, SinceCheckpoint: time.Hour, CheckpointKnown: true}, time.Minute},
		{"just checkpointed", Job{SinceResume: time.Hour, CheckpointKnown: true}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { must.Eq(t, tc.want, tc.j.ProgressLost()) })
	}
}
