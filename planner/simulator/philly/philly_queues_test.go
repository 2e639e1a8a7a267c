package philly

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/caravan-nomad/caravan/planner/workload"
)

// teamTrace: team b fills the 4-GPU cluster with two 10 h jobs; an hour
// later team a, whose guarantee is half the cluster, submits a 1 h job.
func teamTrace() []workload.PhillyJob {
	at := func(h float64) time.Time { return engine.Epoch.Add(time.Duration(h * float64(time.Hour))) }
	return []workload.PhillyJob{
		{Submit: at(0), Duration: 10 * 3600, GPUs: 2, Cluster: "b"},
		{Submit: at(0), Duration: 10 * 3600, GPUs: 2, Cluster: "b"},
		{Submit: at(1), Duration: 3600, GPUs: 2, Cluster: "a"},
		{Submit: at(30), Duration: 19 * 3600, GPUs: 2, Cluster: "a"},
	}
}

func TestGuarantees(t *testing.T) {
	rows := []workload.PhillyJob{{Duration: 100, GPUs: 1, Cluster: "big"}, {Duration: 300, GPUs: 2, Cluster: "huge"},
		{Duration: 1, GPUs: 1, Cluster: "tiny"}}
	vcs, share, quota, err := Guarantees(rows, 10)
	must.NoError(t, err)
	must.Eq(t, []string{"huge", "big", "tiny"}, vcs)
	must.Eq(t, 10, quota["huge"]+quota["big"]+quota["tiny"])
	must.Eq(t, 1, quota["tiny"]) // at least one each
	must.Eq(t, 8, quota["huge"])
	must.Eq(t, 1, quota["big"])
	must.Greater(t, 0.85, share["huge"])
	_, _, _, err = Guarantees(rows, 2)
	must.ErrorContains(t, err, "3 virtual clusters")
}

func TestReplayPhillyQueues(t *testing.T) {
	cfg := engine.Config{Nodes: 1, GPUsPerNode: 4}
	reps := map[QueueMode]QueueReport{}
	for _, m := range QueueModes {
		r, err := ReplayPhillyQueues(cfg, m, teamTrace())
		must.NoError(t, err)
		must.Eq(t, 4, r.Jobs)
		reps[m] = r
	}
	vc := func(m QueueMode, name string) VCStats {
		for _, v := range reps[m].VCs {
			if v.VC == name {
				return v
			}
		}
		t.Fatalf("no vc %s", name)
		return VCStats{}
	}
	// strict: b's second job waits for its first (10 h); a never waits.
	must.Between(t, 10*3600, vc(ModeStrict, "b").P99Wait, 10*3600+600)
	must.Less(t, 300, vc(ModeStrict, "a").MeanWait)
	// shared and borrowing without preemption: a waits for b's borrower.
	for _, m := range []QueueMode{ModeShared, ModeBorrow} {
		must.Between(t, 9*3600, vc(m, "a").P99Wait, 9*3600+600)
		must.Eq(t, 0, reps[m].Reclaims)
	}
	// reclaim: b's borrower is suspended for a, then resumes.
	rc := reps[ModeReclaim]
	must.Eq(t, 1, rc.Reclaims)
	commit, restore := CheckpointTimes(2)
	must.Eq(t, 2*(commit+restore), rc.LostGPUSec)
	must.Less(t, 300, vc(ModeReclaim, "a").MeanWait)
	must.Less(t, 0.5*reps[ModeStrict].MeanWait, rc.MeanWait)
	must.Between(t, 0, rc.Jain, 1)
	goals := Goals(reps)
	must.StrContains(t, goals[0], "MET")
	must.StrContains(t, goals[2], "MET")
}

// TestReplayPhillyQueues_Oversize: under strict quotas a job larger than
// its VC's guarantee still runs (alone in its VC), so the replay ends.
func TestReplayPhillyQueues_Oversize(t *testing.T) {
	rows := teamTrace()
	rows = append(rows, workload.PhillyJob{Submit: engine.Epoch.Add(2 * time.Hour), Duration: 60, GPUs: 4, Cluster: "a"})
	r, err := ReplayPhillyQueues(engine.Config{Nodes: 1, GPUsPerNode: 4}, ModeStrict, rows)
	must.NoError(t, err)
	must.Eq(t, 1, r.Oversize)
	must.Eq(t, 5, r.Jobs)
}
