package planner

import (
	"fmt"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// gangMetaKey is dynamic node meta (`nomad node meta apply`) the gang job is
// constrained to: set on client1 only, Nomad can place 2 of its 4 workers.
const gangMetaKey = "caravan_e2e_gang"

// gangJob is a planner-managed gang of four workers of one simulated GPU
// each (4 shares), submitted at zero, placeable only on nodes with
// gangMetaKey set. Its tasks only sleep.
func gangJob(id string) *nomadapi.Job {
	job := nomadapi.NewServiceJob(id, id, "global", 50)
	job.Datacenters = []string{"*"}
	job.Meta = map[string]string{"caravan_planner": "true", "caravan_gang": "true",
		"caravan_min_workers": "4", "caravan_max_workers": "4"}
	job.Constrain(nomadapi.NewConstraint("${meta."+gangMetaKey+"}", "=", "yes"))
	tg := nomadapi.NewTaskGroup("worker", 0)
	tg.Update = &nomadapi.UpdateStrategy{MaxParallel: ptr(0)} // no deployments: they block scaling
	// raw_exec, as planner-train-sim.nomad.hcl: the caravan driver refuses
	// the MPS directories the device plugin mounts (no filesystem isolation).
	task := nomadapi.NewTask("sleep", "raw_exec")
	task.Config = map[string]any{"command": "/bin/sleep", "args": []string{"600"}}
	shares := uint64(4)
	task.Resources = &nomadapi.Resources{CPU: ptr(20), MemoryMB: ptr(32),
		Devices: []*nomadapi.RequestedDevice{{Name: "caravan/gpushare", Count: &shares}}}
	tg.AddTask(task)
	job.AddTaskGroup(tg)
	return job
}

// setGangMeta sets (or, with on false, removes) gangMetaKey on a client.
func setGangMeta(t *testing.T, c *harness.C, client string, on bool) {
	t.Helper()
	nodes, _, err := c.Nomad.Nodes().List(nil)
	must.NoError(t, err)
	var v *string
	if on {
		yes := "yes"
		v = &yes
	}
	for _, n := range nodes {
		if n.Name != client {
			continue
		}
		_, err := c.Nomad.Nodes().Meta().Apply(&nomadapi.NodeMetaApplyRequest{NodeID: n.ID,
			Meta: map[string]*string{gangMetaKey: v}}, nil)
		must.NoError(t, err)
		// The client updates the servers' copy of its node on its own.
		harness.Eventually(t, 30*time.Second, func() error {
			node, _, err := c.Nomad.Nodes().Info(n.ID, nil)
			if err != nil {
				return err
			}
			if got := node.Meta[gangMetaKey]; (got == "yes") != on {
				return fmt.Errorf("%s meta %s = %q on the servers", client, gangMetaKey, got)
			}
			return nil
		})
		return
	}
	t.Fatalf("no node %s in %d nodes", client, len(nodes))
}

func placed(t *testing.T, c *harness.C, id string) int {
	t.Helper()
	allocs, _, err := c.Nomad.Jobs().Allocations(id, false, nil)
	must.NoError(t, err)
	n := 0
	for _, a := range allocs {
		if a.DesiredStatus == "run" && (a.ClientStatus == "pending" || a.ClientStatus == "running") {
			n++
		}
	}
	return n
}

// TestPlanner_GangWaitsWhole: with a team queue of the cluster's 4
// simulated GPUs, a 4-GPU gang the queues admit but Nomad can place only
// in part (its constraint matches client1's 2 GPUs) is held at zero by
// Nomad's plan: for several rounds none of its workers holds a GPU, its
// count stays 0, and the planner says why. Once client2 matches too, it
// starts whole. About 30 s.
func TestPlanner_GangWaitsWhole(t *testing.T) {
	c := harness.Cluster(t)
	for _, cl := range []string{"client1", "client2"} {
		t.Cleanup(func() { setGangMeta(t, c, cl, false) })
	}
	setGangMeta(t, c, "client1", true)
	setGangMeta(t, c, "client2", false)
	p := startPlanner(t, c, "gang", "queue \"all\" {\n  namespaces = [\"default\"]\n  guarantee  = 4\n}\n")

	const id = "gang-wait"
	_, _, err := c.Nomad.Jobs().Register(gangJob(id), nil)
	must.NoError(t, err)
	t.Cleanup(func() { _, _, _ = c.Nomad.Jobs().Deregister(id, true, nil) })

	detail := func() (string, error) {
		var resp struct {
			Jobs []struct {
				ID     string `json:"id"`
				Detail string `json:"detail"`
			} `json:"jobs"`
		}
		if err := harness.GetJSON(p.url+"/v1/jobs", &resp); err != nil {
			return "", err
		}
		for _, j := range resp.Jobs {
			if j.ID == id {
				return j.Detail, nil
			}
		}
		return "", fmt.Errorf("the planner does not show %s yet", id)
	}
	harness.Eventually(t, 60*time.Second, func() error {
		d, err := detail()
		if err == nil && !strings.Contains(d, "Nomad's plan cannot place all 4 workers at once") {
			err = fmt.Errorf("not held by the plan yet: %q", d)
		}
		return err
	})
	// Four more rounds (interval 3 s): never a worker placed, count 0.
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		must.Eq(t, 0, placed(t, c, id), must.Sprint("a worker of the gang holds a GPU while the rest cannot be placed"))
		job, _, err := c.Nomad.Jobs().Info(id, nil)
		must.NoError(t, err)
		must.Eq(t, 0, *job.TaskGroups[0].Count)
	}
	// Nomad could have placed half of it: the plan says 2 stay unplaced.
	d, err := detail()
	must.NoError(t, err)
	t.Logf("held: %s", d)
	must.StrContains(t, d, "2 allocation(s) unplaced")

	setGangMeta(t, c, "client2", true)
	harness.Eventually(t, 60*time.Second, func() error {
		if n := placed(t, c, id); n != 4 {
			return fmt.Errorf("%d of 4 workers placed", n)
		}
		return nil
	})
}

// TestPlanner_PartlyPlacedGangRolledBack forces the race the plan cannot
// close: the gang is submitted at 4 workers where only client1 (2 GPUs)
// may run it, so Nomad places half of it on its own. The planner scales it
// back to 0 a round after it first sees it (a scaling event says why), and
// it then waits whole. About 40 s.
func TestPlanner_PartlyPlacedGangRolledBack(t *testing.T) {
	c := harness.Cluster(t)
	for _, cl := range []string{"client1", "client2"} {
		t.Cleanup(func() { setGangMeta(t, c, cl, false) })
	}
	setGangMeta(t, c, "client1", true)
	setGangMeta(t, c, "client2", false)
	p := startPlanner(t, c, "rollback", "queue \"all\" {\n  namespaces = [\"default\"]\n  guarantee  = 4\n}\n")
	harness.Eventually(t, 30*time.Second, func() error {
		h, err := p.health()
		if err == nil && (!h.Leader || !h.Synced) {
			err = fmt.Errorf("planner not leading yet: %+v", h)
		}
		return err
	})

	const id = "gang-race"
	job := gangJob(id)
	job.TaskGroups[0].Count = ptr(4)
	_, _, err := c.Nomad.Jobs().Register(job, nil)
	must.NoError(t, err)
	t.Cleanup(func() { _, _, _ = c.Nomad.Jobs().Deregister(id, true, nil) })

	var partial time.Time
	harness.Eventually(t, 30*time.Second, func() error {
		if n := placed(t, c, id); n != 2 {
			return fmt.Errorf("%d workers placed, waiting for Nomad to place 2 of 4", n)
		}
		partial = time.Now()
		return nil
	})
	harness.Eventually(t, 60*time.Second, func() error {
		if n := placed(t, c, id); n != 0 {
			return fmt.Errorf("%d workers still hold GPUs", n)
		}
		return nil
	})
	held := time.Since(partial)
	t.Logf("half-placed gang held GPUs for %s after the test saw it (planner interval 3s)", held.Round(100*time.Millisecond))
	must.Less(t, 15*time.Second, held, must.Sprint("the rollback comes a round after the planner first sees the gang partial"))

	info, _, err := c.Nomad.Jobs().Info(id, nil)
	must.NoError(t, err)
	must.Eq(t, 0, *info.TaskGroups[0].Count)
	evs := events(t, c, id)
	must.SliceNotEmpty(t, evs)
	last := evs[len(evs)-1]
	must.Eq(t, "gang-rollback", action(last))
	must.StrContains(t, last.Message, "gang rolled back 4 -> 0 (Nomad placed only part of it)")
	must.StrContains(t, last.Message, "2 of its 4 workers placed")

	// Rolled back, it waits whole: Nomad's plan holds it at 0 until it
	// fits, then it starts with all 4 workers.
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		must.Eq(t, 0, placed(t, c, id), must.Sprint("the rolled-back gang was placed in part again"))
	}
	setGangMeta(t, c, "client2", true)
	harness.Eventually(t, 90*time.Second, func() error {
		if n := placed(t, c, id); n != 4 {
			return fmt.Errorf("%d of 4 workers placed", n)
		}
		return nil
	})
}
