package adversarial

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

const containerJob = "e2e/adversarial/testdata/container.nomad.hcl"

// loadAdversaryImage builds the caravan-adversary image (cached under
// build/images) and loads build/images into the cluster's runtimes.
func loadAdversaryImage(t *testing.T, c *harness.C) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{filepath.Join(c.Root, "scripts", "build-images.sh"), "caravan-adversary"},
		{filepath.Join(c.Root, "scripts", "cluster.sh"), "images"},
	} {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = c.Root
		cmd.Env = append(os.Environ(), "CARAVAN_CLUSTER_DIR="+c.Dir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		must.NoError(t, cmd.Run(), must.Sprintf("%s: %s", strings.Join(args, " "), out.String()))
	}
}

// taskEvent waits for a driver event of one task of the allocation.
func (a *adversary) taskEvent(t *testing.T, allocID, taskName, substr string) *nomadapi.TaskEvent {
	t.Helper()
	var ev *nomadapi.TaskEvent
	harness.Eventually(t, 2*time.Minute, func() error {
		var seen []string
		for _, e := range a.c.TaskEvents(t, allocID, taskName) {
			seen = append(seen, e.Type+": "+e.DriverMessage+e.DisplayMessage)
			if strings.Contains(e.DriverMessage, substr) || strings.Contains(e.DisplayMessage, substr) {
				ev = e
				return nil
			}
		}
		return fmt.Errorf("no %q event of %s on %s; events: %q", substr, taskName, allocID, seen)
	})
	return ev
}

// taskStarted waits until the allocation's task has started.
func taskStarted(t *testing.T, c *harness.C, allocID, taskName string) {
	t.Helper()
	harness.Eventually(t, 2*time.Minute, func() error {
		al, _, err := c.Nomad.Allocations().Info(allocID, nil)
		if err != nil {
			return err
		}
		if ts := al.TaskStates[taskName]; ts == nil || ts.StartedAt.IsZero() {
			return fmt.Errorf("task %s of %s not started yet", taskName, allocID)
		}
		return nil
	})
}

// TestDriver_ContainerIgnoresCheckpointRequests: a container that wrote one
// checkpoint, then answers neither the sidecar's request nor its kill
// signal, under Nomad's docker driver against dockerd and against podman.
// Expected: the on-demand request fails with an event at the sidecar's
// timeout; the stop ends at the kill timeout (5 s), not later; the poststop
// task commits the last complete checkpoint, nothing half-written; the
// replacement allocation restores it.
func TestDriver_ContainerIgnoresCheckpointRequests(t *testing.T) {
	c := harness.Cluster(t)
	loadAdversaryImage(t, c)
	for _, d := range harness.ContainerRuntimes {
		t.Run(d.Name, func(t *testing.T) {
			c.RequireRuntime(t, d.Client, d.Name)
			a := newAdversary(t)
			a.c.RunJob(t, containerJob, "name="+a.job, "case=ignore", "sentinel="+a.sentinel, "runtime="+d.Name, "node="+d.Client)
			al := a.running(t)
			taskStarted(t, a.c, al.ID, task)
			a.logged(t, al.ID, "planted ignore")
			_, err := a.c.CLI(t, "alloc", "signal", "-s", "SIGUSR1", al.ID, "checkpoint")
			must.NoError(t, err)
			a.taskEvent(t, al.ID, "checkpoint", "Checkpoint failed (on demand): timed out")
			must.Eq(t, uint64(0), a.newest(t))

			took := a.stopAlloc(t, al.ID)
			must.Less(t, time.Minute, took, must.Sprintf("stop took %s with kill_timeout = 5s", took))
			must.Greater(t, 5*time.Second, took, must.Sprintf("stop took %s: the container was not left its kill_timeout", took))
			a.taskEvent(t, al.ID, "commit", "Checkpoint saved (exit): generation 1 at step 1")
			must.Eq(t, uint64(1), a.newest(t))
			next := a.running(t, al.ID) // Nomad replaces a stopped allocation
			a.taskEvent(t, next.ID, "restore", "Checkpoint restored: generation 1 (step 1)")
			a.untouched(t)
			t.Logf("%s: stop of a container deaf to SIGTERM took %s (kill_timeout 5s)", d.Name, took.Round(10*time.Millisecond))
		})
	}
}

// TestDriver_ContainerCheckpointDir: the driver's hardening, against a
// container task under Nomad's docker driver against dockerd and against
// podman's Docker-compatible API (rootful dockerd and podman: what the
// container writes into /alloc is written as host root, CAP_MKNOD included)
// and caravan's checkpoint role tasks, which run as host root and reach the
// container's checkpoint only
// through the allocation directory. The container plants a symlink to a
// host file (resolved against the host's root by the host-side tasks), a
// FIFO, a symlinked, FIFO or 256 MiB marker, a symlinked checkpoint
// directory, a hard link out of the checkpoint, or a symlinked request file
// for the sidecar. Expected: the poststop commit fails with an event naming
// the problem and commits nothing, except the hard link, stored as a copy;
// the sidecar replaces its request file rather than follow it; no host
// bytes reach an event; the sentinel tree on the host is untouched.
func TestDriver_ContainerCheckpointDir(t *testing.T) {
	c := harness.Cluster(t)
	loadAdversaryImage(t, c)
	cases := []struct {
		name string
		want string // the commit task's event; "" when it saves
	}{
		{"symlink-out", "Checkpoint failed (exit)"},
		{"symlink-marker", "is not a regular file"},
		{"fifo", "Checkpoint failed (exit)"},
		{"fifo-marker", "is not a regular file"},
		{"huge-marker", "too large"},
		{"dir-symlink", "Checkpoint failed (exit)"},
		{"hardlink", ""},
		{"request-symlink", ""},
	}
	for _, d := range harness.ContainerRuntimes {
		t.Run(d.Name, func(t *testing.T) {
			c.RequireRuntime(t, d.Client, d.Name)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) { containerAttack(t, d, tc.name, tc.want) })
			}
		})
	}
}

// containerAttack runs one case of TestDriver_ContainerCheckpointDir under
// the runtime: want is the commit task's event, "" when it saves.
func containerAttack(t *testing.T, d harness.ContainerRuntime, name, want string) {
	a := newAdversary(t)
	a.c.RunJob(t, containerJob, "name="+a.job, "case="+name, "sentinel="+a.sentinel, "runtime="+d.Name, "node="+d.Client)
	al := a.running(t)
	taskStarted(t, a.c, al.ID, task) // the allocation runs from its prestart task on
	a.logged(t, al.ID, "planted "+name)
	if name == "request-symlink" {
		_, err := a.c.CLI(t, "alloc", "signal", "-s", "SIGUSR1", al.ID, "checkpoint")
		must.NoError(t, err)
		// The container never answers: the request times out.
		a.taskEvent(t, al.ID, "checkpoint", "Checkpoint failed (on demand): timed out")
		a.untouched(t)
	}
	took := a.stopAlloc(t, al.ID)
	must.Less(t, time.Minute, took, must.Sprintf("stop took %s with kill_timeout = 5s", took))
	switch want {
	case "":
		if name == "hardlink" {
			a.taskEvent(t, al.ID, "commit", "Checkpoint saved (exit): generation 1")
			must.Eq(t, uint64(1), a.newest(t))
		}
	default:
		a.taskEvent(t, al.ID, "commit", want)
		must.Eq(t, uint64(0), a.newest(t), must.Sprint("something was committed from the planted directory"))
	}
	for _, task := range []string{"commit", "checkpoint", "restore"} {
		for _, e := range a.c.TaskEvents(t, al.ID, task) {
			must.StrNotContains(t, e.DriverMessage+e.DisplayMessage+fmt.Sprint(e.Details), "HOST-SECRET")
		}
	}
	a.untouched(t)
}
