package containers_test

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

const (
	trainGroup = "train"
	ckptSteps  = 15000
)

// trainJob is the shipped checkpointed trainer jobspec of Nomad's docker
// driver, which runs under either runtime: the client it is pinned to
// (variable node) decides which. Its driver=podman variant, for Nomad's
// podman driver plugin, is not run here (README.md).
const trainJob = "jobspecs/train-container.nomad.hcl"

var progressLine = regexp.MustCompile(`(?m)^step=\d+ `)

// TestContainers_SuspendResume: the FROM scratch trainer under Nomad's
// docker driver under dockerd and under podman, checkpointed by caravan's
// lifecycle tasks (jobspecs/train-container.nomad.hcl), is suspended
// mid-training (scale 0: SIGTERM, the trainer saves and exits, the poststop
// task commits) and resumed (scale 1: the prestart task restores), and ends
// with parameters bit for bit equal to an uninterrupted host process's.
func TestContainers_SuspendResume(t *testing.T) {
	c := harness.Cluster(t)
	c.LoadImages(t)
	out, err := exec.Command(c.Bin, "trainer", "-steps", strconv.Itoa(ckptSteps), "-log-every", "0").CombinedOutput()
	must.NoError(t, err, must.Sprintf("host trainer: %s", out))
	want := finalLine.FindString(string(out))
	must.NotEq(t, "", want, must.Sprintf("host trainer printed no final line: %s", out))
	for _, d := range harness.ContainerRuntimes {
		t.Run(d.Name, func(t *testing.T) {
			c.RequireRuntime(t, d.Client, d.Name)
			jobID := c.RunJob(t, trainJob, "job_name=e2e-ctr-ckpt-"+d.Name, "node="+d.Client,
				"steps="+strconv.Itoa(ckptSteps), "step_delay=2ms")
			a1 := liveAlloc(t, c, jobID, nil)
			c.WaitDriverEvent(t, a1, "restore", "No checkpoint under")
			harness.Eventually(t, 5*time.Minute, func() error {
				if !progressLine.MatchString(c.Logs(t, a1, "trainer", "stdout")) {
					return fmt.Errorf("no training progress in %s yet", a1)
				}
				return nil
			})

			// Suspend: the kill signal makes the trainer save; the poststop
			// task commits.
			_, err := c.CLI(t, "job", "scale", jobID, trainGroup, "0")
			must.NoError(t, err)
			saved := c.WaitDriverEvent(t, a1, "commit", "Checkpoint saved (exit)")
			c.WaitAllocStatus(t, a1, "complete", 2*time.Minute)
			step, err := strconv.Atoi(saved.Details["step"])
			must.NoError(t, err, must.Sprintf("saved event %q has no step", saved.DriverMessage))
			must.Less(t, ckptSteps, step, must.Sprint("suspended after training ended; the test proves nothing"))

			// Resume: the prestart task restores that generation.
			_, err = c.CLI(t, "job", "scale", jobID, trainGroup, "1")
			must.NoError(t, err)
			a2 := liveAlloc(t, c, jobID, map[string]bool{a1: true})
			restored := c.WaitDriverEvent(t, a2, "restore", "Checkpoint restored")
			must.Eq(t, saved.Details["generation"], restored.Details["generation"])
			var got, log string
			harness.Eventually(t, 6*time.Minute, func() error {
				log = c.Logs(t, a2, "trainer", "stdout")
				if got = finalLine.FindString(log); got == "" {
					return fmt.Errorf("no final line in the %s container's log yet", d.Name)
				}
				return nil
			})
			must.StrContains(t, log, "resumed step="+saved.Details["step"]+" ")
			t.Logf("%s: suspended at step %d (generation %s), restored in %s, final line equal to the host run's",
				d.Name, step, saved.Details["generation"], restored.Details["duration"])
			must.Eq(t, want, got, must.Sprintf("the resumed %s container's final line against the host process's", d.Name))
		})
	}
}

// TestContainers_SidecarAndSlowFinalCommit: the trainer under Nomad's docker
// driver under dockerd and under podman with the three caravan checkpoint
// tasks of the shipped jobspec (jobspecs/train-container.nomad.hcl, with a
// larger model). The sidecar takes an on-demand checkpoint (`nomad alloc signal` to the
// sidecar; it writes the request file the trainer polls). Then the job is
// scaled 1 -> 0 and, as soon as Nomad has marked the old allocation for
// stopping, 0 -> 1: Nomad does not make the new allocation wait for the old
// one's poststop commit, and the trainer's final save of a 64 MiB state
// takes seconds. The new allocation's restore waits for that commit (when
// Nomad starts it before the commit ends, as on a quiet machine) and
// restores the generation it wrote, never the sidecar's older one; the
// resumed trainer continues from its step.
func TestContainers_SidecarAndSlowFinalCommit(t *testing.T) {
	c := harness.Cluster(t)
	c.LoadImages(t)
	for _, d := range harness.ContainerRuntimes {
		t.Run(d.Name, func(t *testing.T) { sidecarAndSlowFinalCommit(t, c, d.Name, d.Client) })
	}
}

func sidecarAndSlowFinalCommit(t *testing.T, c *harness.C, runtime, client string) {
	c.RequireRuntime(t, client, runtime)
	jobID := c.RunJob(t, trainJob, "job_name=e2e-ctr-sidecar-"+runtime, "node="+client,
		"memory=1024", "kill_timeout=60s", "checkpoint_interval=0", "steps=100000", "step_delay=0s",
		`extra_args=["-features","2048","-hidden","2048","-log-every","1"]`)
	a1 := liveAlloc(t, c, jobID, nil)
	c.WaitDriverEvent(t, a1, "checkpoint", `Checkpoint sidecar for task "trainer" started`)
	harness.Eventually(t, 6*time.Minute, func() error {
		if !progressLine.MatchString(c.Logs(t, a1, "trainer", "stdout")) {
			return fmt.Errorf("no training progress in %s yet", a1)
		}
		return nil
	})

	_, err := c.CLI(t, "alloc", "signal", "-s", "SIGUSR1", a1, "checkpoint")
	must.NoError(t, err)
	onDemand := c.WaitDriverEvent(t, a1, "checkpoint", "Checkpoint saved (on demand)")
	odGen, err := strconv.Atoi(onDemand.Details["generation"])
	must.NoError(t, err, must.Sprintf("event %q", onDemand.DriverMessage))

	_, err = c.CLI(t, "job", "scale", "-detach", jobID, trainGroup, "0")
	must.NoError(t, err)
	c.WaitAllocs(t, jobID, time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		for _, a := range as {
			if a.ID == a1 {
				return a.DesiredStatus == "stop"
			}
		}
		return false
	})
	_, err = c.CLI(t, "job", "scale", "-detach", jobID, trainGroup, "1")
	must.NoError(t, err)

	a2 := liveAlloc(t, c, jobID, map[string]bool{a1: true})
	saved := c.WaitDriverEvent(t, a1, "commit", "Checkpoint saved (exit)")
	restored := c.WaitDriverEvent(t, a2, "restore", "Checkpoint restored")
	how := restoreWait(t, c, a1, a2, saved)
	must.Eq(t, saved.Details["generation"], restored.Details["generation"],
		must.Sprintf("restored %q; the old allocation's final commit was %q", restored.DriverMessage, saved.DriverMessage))
	gen, err := strconv.Atoi(saved.Details["generation"])
	must.NoError(t, err)
	must.Less(t, gen, odGen, must.Sprint("the final commit is not newer than the sidecar's"))
	harness.Eventually(t, 6*time.Minute, func() error {
		if log := c.Logs(t, a2, "trainer", "stdout"); !strings.Contains(log, "resumed step="+saved.Details["step"]+" ") {
			return fmt.Errorf("the resumed trainer did not report step %s yet", saved.Details["step"])
		}
		return nil
	})
	t.Logf("%s: on demand: generation %d; final commit: generation %d at step %s (%s); %s; restored it in %s",
		runtime, odGen, gen, saved.Details["step"], saved.Details["duration"], how, restored.Details["duration"])
}

// restoreWait says whether the new allocation's restore waited for the old
// one's final commit. On a quiet machine it does (the trainer's save takes
// seconds, and Nomad starts the new allocation at once). On a loaded one
// Nomad may start it only after the commit ended: there is nothing to wait
// for. Either way the restored generation must be the final commit's,
// which the caller checks: a restore that did not wait for a commit in
// flight would restore the sidecar's older generation.
func restoreWait(t *testing.T, c *harness.C, a1, a2 string, saved *nomadapi.TaskEvent) string {
	t.Helper()
	started := "never"
	for _, e := range c.TaskEvents(t, a2, "restore") {
		if e.Type == nomadapi.TaskDriverMessage && strings.Contains(e.DriverMessage, "Waiting for allocation "+a1) {
			return fmt.Sprintf("the restore waited (%q)", e.DriverMessage)
		}
		if e.Type == nomadapi.TaskStarted && started == "never" {
			started = time.Duration(e.Time - saved.Time).Round(time.Millisecond).String()
		}
	}
	return "the restore did not wait: Nomad had the old allocation finished when it looked (its task started " +
		started + " after the final commit's event)"
}

// liveAlloc waits for a running allocation of the job not in exclude.
func liveAlloc(t *testing.T, c *harness.C, jobID string, exclude map[string]bool) string {
	t.Helper()
	var id string
	c.WaitAllocs(t, jobID, 3*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		for _, a := range as {
			if !exclude[a.ID] && a.DesiredStatus == "run" && a.ClientStatus == "running" {
				id = a.ID
				return true
			}
		}
		return false
	})
	return id
}
