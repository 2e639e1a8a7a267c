package containers_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// TestContainers_PodmanCleansUpExitedContainers: a container that exits
// under the cluster's podman service is cleaned up (its state becomes
// "exited"). The cleanup is conmon's exit command, `podman container
// cleanup --runroot ...`, and podman refuses a --runroot longer than 50
// characters: with the runroot under a long cluster dir the cleanup failed,
// the container stayed "stopped" for good, and every wait on it (a
// driver's, on each stop of a task under podman) returned only at podman's
// 20 s cleanup timeout. scripts/cluster/runtimes.sh now gives podman a
// short runroot.
func TestContainers_PodmanCleansUpExitedContainers(t *testing.T) {
	c := harness.Cluster(t)
	c.LoadImages(t)
	c.RequireRuntime(t, "client2", "podman")
	sock := "unix://" + filepath.Join(c.Dir, "runtimes", "podman", "podman.sock")
	podman := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("podman", append([]string{"--remote", "--url", sock}, args...)...).CombinedOutput()
		must.NoError(t, err, must.Sprintf("podman %s: %s", strings.Join(args, " "), out))
		return strings.TrimSpace(string(out))
	}
	id := podman("run", "-d", "--network", "none", "localhost/caravan-trainer:local",
		"trainer", "-steps", "1000000", "-step-delay", "2ms", "-log-every", "0")
	t.Cleanup(func() { _ = exec.Command("podman", "--remote", "--url", sock, "rm", "-f", id).Run() })
	harness.Eventually(t, time.Minute, func() error {
		if st := podman("inspect", "-f", "{{.State.Status}}", id); st != "running" {
			return fmt.Errorf("container %s is %s, not running yet", id[:12], st)
		}
		return nil
	})
	podman("kill", "-s", "SIGTERM", id) // the trainer exits at once
	harness.Eventually(t, time.Minute, func() error {
		if st := podman("inspect", "-f", "{{.State.Status}}", id); st != "exited" {
			return fmt.Errorf("container %s is %q after its exit: podman's cleanup did not run (see the podman "+
				"service's runroot in %s)", id[:12], st, filepath.Join(c.Dir, "runtimes", "podman", "storage.conf"))
		}
		return nil
	})
}
