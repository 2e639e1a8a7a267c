package driver

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// shellJob is a one-task batch job on the given driver.
func shellJob(id, driver, node string) *nomadapi.Job {
	job := nomadapi.NewBatchJob(id, id, "global", 50)
	job.Datacenters = []string{"dc1"}
	job.Constrain(nomadapi.NewConstraint("${node.unique.name}", "=", node))
	tg := nomadapi.NewTaskGroup("g", 1)
	tg.RestartPolicy = &nomadapi.RestartPolicy{Attempts: ptr(0), Mode: ptr("fail")}
	tg.ReschedulePolicy = &nomadapi.ReschedulePolicy{Attempts: ptr(0), Unlimited: ptr(false)}
	task := nomadapi.NewTask("t", driver)
	task.Config = map[string]any{"command": "/bin/sh", "args": []string{"-c", "echo ran"}}
	task.Resources = &nomadapi.Resources{CPU: ptr(50), MemoryMB: ptr(32)}
	tg.AddTask(task)
	job.AddTaskGroup(tg)
	return job
}

func ptr[T any](v T) *T { return &v }

// TestDriver_Options starts two standalone agents: one whose caravan
// driver is left off (no `enabled = true`), one whose driver denies the
// host UID the agent runs as. The first is not fingerprinted, so Nomad
// places no caravan task there ("missing drivers"); on the second a
// caravan task fails with the reason while raw_exec is unaffected.
func TestDriver_Options(t *testing.T) {
	c := harness.Cluster(t)
	off := harness.NewAgent(t, c, "driver-off", 1)
	off.Start(t, off.PluginConfig(harness.OneSimulatedGPU, fmt.Sprintf("checkpoint_store = %q", off.C.CheckpointDir)))
	deny := harness.NewAgent(t, c, "driver-deny", 2)
	uid := os.Getuid()
	deny.Start(t, deny.PluginConfig(harness.OneSimulatedGPU, fmt.Sprintf("enabled = true\ndenied_host_uids = \"%d\"", uid)))

	t.Run("disabled", func(t *testing.T) {
		node := off.WaitNode(t, 2*time.Minute)
		harness.Eventually(t, time.Minute, func() error {
			n, _, err := off.C.Nomad.Nodes().Info(node.ID, nil)
			if err != nil {
				return err
			}
			if n.Drivers["raw_exec"] == nil || !n.Drivers["raw_exec"].Healthy {
				return fmt.Errorf("raw_exec not fingerprinted yet")
			}
			if di := n.Drivers["caravan"]; di == nil || di.Detected {
				return fmt.Errorf("caravan driver: %+v (want fingerprinted as not detected)", di)
			}
			return nil
		})
		out, _ := off.C.CLI(t, "job", "plan", "-var", "caravan_bin="+c.Bin, "-var", "nodes=driver-off",
			c.Root+"/"+jobspec)
		must.StrContains(t, out, "missing drivers")
	})

	t.Run("denied host uid", func(t *testing.T) {
		deny.WaitNode(t, 2*time.Minute)
		ac := deny.C
		for _, drv := range []string{"caravan", "raw_exec"} {
			_, _, err := ac.Nomad.Jobs().Register(shellJob("uid-"+drv, drv, "driver-deny"), nil)
			must.NoError(t, err)
			t.Cleanup(func() { ac.StopJob(t, "uid-"+drv) })
		}
		ac.WaitAllocs(t, "uid-raw_exec", 2*time.Minute, func(a []*nomadapi.AllocationListStub) bool {
			return len(a) == 1 && a[0].ClientStatus == nomadapi.AllocClientStatusComplete
		})
		allocs := ac.WaitAllocs(t, "uid-caravan", 2*time.Minute, func(a []*nomadapi.AllocationListStub) bool {
			return len(a) == 1 && a[0].ClientStatus == nomadapi.AllocClientStatusFailed
		})
		var msgs []string
		for _, ev := range ac.TaskEvents(t, allocs[0].ID, "t") {
			msgs = append(msgs, ev.DisplayMessage)
		}
		must.StrContains(t, strings.Join(msgs, "\n"), fmt.Sprintf("has UID %d, which denied_host_uids (\"%d\") forbids on this client", uid, uid))
	})
}
