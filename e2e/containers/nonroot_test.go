package containers_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// TestContainers_NonRootSuspendResume: the trainer container of the
// shipped jobspec (trainJob, variable user) running as a non-root user, by
// a numeric task `user` (65534, the FROM scratch image
// without /etc/passwd: gid 0) and by its image's USER (a name, resolved
// in the image's own /etc/passwd: 4242:4343), under dockerd (client1) and
// podman (client2). The restore task gives /alloc/checkpoint that owner,
// the trainer saves on its kill signal (scale 0), the commit task commits
// it, the next allocation restores it (scale 1) and the trainer ends bit
// for bit equal to an uninterrupted host process. Before the fix the
// directory stayed root's 0755 and the save failed with permission denied.
func TestContainers_NonRootSuspendResume(t *testing.T) {
	c := harness.Cluster(t)
	c.LoadImages(t)
	out, err := exec.Command(c.Bin, "trainer", "-steps", strconv.Itoa(ckptSteps), "-log-every", "0").CombinedOutput()
	must.NoError(t, err, must.Sprintf("host trainer: %s", out))
	want := finalLine.FindString(string(out))
	must.NotEq(t, "", want, must.Sprintf("host trainer printed no final line: %s", out))
	variants := []struct {
		name, image, user string
		uid, gid          uint32
	}{
		{"user-65534", "localhost/caravan-trainer:local", "65534", 65534, 0},
		{"image-USER", "localhost/caravan-trainer-nonroot:local", "", 4242, 4343},
	}
	for _, d := range harness.ContainerRuntimes {
		for _, v := range variants {
			t.Run(d.Name+"/"+v.name, func(t *testing.T) {
				c.RequireRuntime(t, d.Client, d.Name)
				jobID := c.RunJob(t, trainJob, "job_name=e2e-nonroot-"+d.Name+"-"+strings.ToLower(v.name),
					"node="+d.Client, "image="+v.image, "user="+v.user, "steps="+strconv.Itoa(ckptSteps))
				a1 := liveAlloc(t, c, jobID, nil)
				c.WaitDriverEvent(t, a1, "restore", "No checkpoint under")
				uid, gid := ownerOf(t, filepath.Join(c.Dir, d.Client, "alloc", a1, "alloc", "checkpoint"))
				must.Eq(t, [2]uint32{v.uid, v.gid}, [2]uint32{uid, gid}, must.Sprint("owner of alloc/checkpoint"))
				harness.Eventually(t, 2*time.Minute, func() error {
					if !progressLine.MatchString(c.Logs(t, a1, "trainer", "stdout")) {
						return fmt.Errorf("no training progress in %s yet", a1)
					}
					return nil
				})

				_, err := c.CLI(t, "job", "scale", jobID, trainGroup, "0")
				must.NoError(t, err)
				saved := c.WaitDriverEvent(t, a1, "commit", "Checkpoint saved (exit)")
				c.WaitAllocStatus(t, a1, "complete", 2*time.Minute)
				step, err := strconv.Atoi(saved.Details["step"])
				must.NoError(t, err, must.Sprintf("saved event %q has no step", saved.DriverMessage))
				must.Less(t, ckptSteps, step, must.Sprint("suspended after training ended; the test proves nothing"))

				_, err = c.CLI(t, "job", "scale", jobID, trainGroup, "1")
				must.NoError(t, err)
				a2 := liveAlloc(t, c, jobID, map[string]bool{a1: true})
				restored := c.WaitDriverEvent(t, a2, "restore", "Checkpoint restored")
				must.Eq(t, saved.Details["generation"], restored.Details["generation"])
				uid, gid = ownerOf(t, filepath.Join(c.Dir, d.Client, "alloc", a2, "alloc", "checkpoint", "caravan-checkpoint.json"))
				must.Eq(t, [2]uint32{v.uid, v.gid}, [2]uint32{uid, gid}, must.Sprint("owner of the restored marker"))
				var got, log string
				harness.Eventually(t, 3*time.Minute, func() error {
					log = c.Logs(t, a2, "trainer", "stdout")
					if got = finalLine.FindString(log); got == "" {
						return fmt.Errorf("no final line in the %s container's log yet", d.Name)
					}
					return nil
				})
				must.StrContains(t, log, "resumed step="+saved.Details["step"]+" ")
				t.Logf("%s %s: owner %d:%d, suspended at step %d (generation %s), restored in %s, final line equal to the host run's",
					d.Name, v.name, v.uid, v.gid, step, saved.Details["generation"], restored.Details["duration"])
				must.Eq(t, want, got, must.Sprintf("the resumed %s container's final line against the host process's", d.Name))
			})
		}
	}
}

// TestContainers_MountOverCheckpointDir: a container task with a volume
// mounted over /alloc/checkpoint (the shipped jobspec's variable volumes)
// would save into the volume, which the commit never sees ("No new
// checkpoint", then step 0 on the next start).
// The restore task refuses it before the container starts, naming the
// volume, under dockerd and podman.
func TestContainers_MountOverCheckpointDir(t *testing.T) {
	c := harness.Cluster(t)
	c.LoadImages(t)
	const volume = "local/ckpt-bind:/alloc/checkpoint"
	for _, d := range harness.ContainerRuntimes {
		t.Run(d.Name, func(t *testing.T) {
			c.RequireRuntime(t, d.Client, d.Name)
			jobID := c.RunJob(t, trainJob, "job_name=e2e-ckpt-mount-"+d.Name, "node="+d.Client,
				"image=localhost/caravan-trainer:local", `volumes=["`+volume+`"]`)
			var alloc string
			c.WaitAllocs(t, jobID, 3*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
				for _, a := range as {
					if a.ClientStatus == "failed" {
						alloc = a.ID
						return true
					}
				}
				return false
			})
			var failure string
			for _, e := range c.TaskEvents(t, alloc, "restore") {
				if e.Type == nomadapi.TaskDriverFailure {
					failure = e.DisplayMessage
				}
			}
			must.StrContains(t, failure, `volumes entry "`+volume+`" at /alloc/checkpoint, over its checkpoint directory`)
			for _, e := range c.TaskEvents(t, alloc, "trainer") {
				must.NotEq(t, nomadapi.TaskStarted, e.Type, must.Sprint("the trainer started"))
			}
			for _, e := range c.TaskEvents(t, alloc, "commit") {
				must.StrNotContains(t, e.DisplayMessage, "No new checkpoint")
			}
			t.Logf("%s: restore failed: %s", d.Name, failure)
		})
	}
}

func ownerOf(t *testing.T, path string) (uint32, uint32) {
	t.Helper()
	fi, err := os.Lstat(path)
	must.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}
