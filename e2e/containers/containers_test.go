// Package containers_test runs container tasks on the real local cluster
// under both of its container runtimes, each through Nomad's built-in
// docker driver: on client1 against the cluster's dockerd, on client2
// against its podman service's Docker-compatible API (node meta
// caravan.container_runtime; harness.ContainerRuntimes), with images built
// here (scripts/build-images.sh) and never pulled. The GPUs are the device
// plugin's simulated ones. Nomad's podman driver plugin is not tested here:
// no build of it free of BUSL-1.1 code exists (README.md).
//
// A missing runtime fails these tests: `make e2e` installs both runtimes
// (scripts/install-e2e-deps.sh), and scripts/cluster.sh starts them.
package containers_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

const (
	vendor       = "caravan"
	task         = "worker"
	containerJob = "e2e/containers/testdata/gpu-fraction-container.nomad.hcl"
	trainerJob   = "e2e/containers/testdata/trainer-container.nomad.hcl"
	hostJob      = "jobspecs/gpu-fraction.nomad.hcl"
	probeImage   = "localhost/caravan-envprobe:local"
)

// pullFailure is what the docker driver's event says when an image is
// neither local nor pullable, under either runtime.
const pullFailure = "Failed to pull `%s`"

// gpuOf returns the single device assignment of the allocation's task.
func gpuOf(t *testing.T, a *nomadapi.Allocation) *nomadapi.AllocatedDeviceResource {
	t.Helper()
	devs := a.AllocatedResources.Tasks[task].Devices
	must.Len(t, 1, devs, must.Sprintf("allocation %s", a.ID))
	must.Eq(t, vendor, devs[0].Vendor)
	return devs[0]
}

// taskOutput waits for the task's printed environment (the probe ends it
// with ENVPROBE_DONE=1; the host job's `env` has CARAVAN_GPU_RESERVATION)
// and parses NAME=value lines; other lines are returned as they are.
func taskOutput(t *testing.T, c *harness.C, allocID, until string) (map[string]string, []string) {
	t.Helper()
	env := map[string]string{}
	var other []string
	harness.Eventually(t, time.Minute, func() error {
		out := c.Logs(t, allocID, task, "stdout")
		other = other[:0]
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "PATH ") {
				other = append(other, line)
			} else if k, v, ok := strings.Cut(line, "="); ok {
				env[k] = v
			}
		}
		if env[until] == "" {
			return fmt.Errorf("no %s in the task's output yet", until)
		}
		return nil
	})
	return env, other
}

// gpuEnv keeps the variables caravan's device plugin sets.
func gpuEnv(env map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		if strings.HasPrefix(k, "CARAVAN_GPU_") || strings.HasPrefix(k, "CUDA_") || strings.HasPrefix(k, "NVIDIA_") {
			out[k] = v
		}
	}
	return out
}

func keys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestContainers_FractionalGPU: two 2-share container tasks on one simulated
// GPU see what a host task sees: the same variables, the same limits and MPS
// directories (bind-mounted into the container), and their own GPU and
// shares; under dockerd and under podman.
func TestContainers_FractionalGPU(t *testing.T) {
	c := harness.Cluster(t)
	c.LoadImages(t)
	for _, d := range harness.ContainerRuntimes {
		t.Run(d.Name, func(t *testing.T) {
			cl := c.RequireRuntime(t, d.Client, d.Name)
			c.RequireQuietGPUs(t, cl.NodeID, vendor)
			pipeDir := filepath.Join(c.Dir, "mps", d.Client, "pipe")
			logDir := filepath.Join(c.Dir, "mps", d.Client, "log")
			paths := fmt.Sprintf(`probe_paths=[%q,%q]`, pipeDir, logDir)
			vars := func(name string) []string {
				return []string{"job_name=e2e-ctr-" + d.Name + "-" + name, "node=" + d.Client, "runtime=" + d.Name, paths}
			}

			a := c.RunningAlloc(t, containerJob, vars("a")...)
			b := c.RunningAlloc(t, containerJob, vars("b")...)
			// GPU 0 is full: the host task gets GPU 1, by the same rules.
			h := c.RunningAlloc(t, hostJob, "job_name=e2e-ctr-"+d.Name+"-host", "node="+d.Client, "shares=2")
			ga, gb, gh := gpuOf(t, a), gpuOf(t, b), gpuOf(t, h)
			must.Eq(t, ga.Name, gb.Name, must.Sprint("both container fractions on one GPU"))
			must.NotEq(t, ga.Name, gh.Name)

			hostEnv, _ := taskOutput(t, c, h.ID, "CARAVAN_GPU_RESERVATION")
			host := gpuEnv(hostEnv)
			must.Eq(t, pipeDir, host["CUDA_MPS_PIPE_DIRECTORY"])
			must.Eq(t, logDir, host["CUDA_MPS_LOG_DIRECTORY"])
			var tokens []string
			for _, alloc := range []*nomadapi.Allocation{a, b} {
				dev := gpuOf(t, alloc)
				all, lines := taskOutput(t, c, alloc.ID, "ENVPROBE_DONE")
				env := gpuEnv(all)
				must.Eq(t, keys(host), keys(env), must.Sprint("a container sees the variables a host task sees"))
				ids := slices.Clone(dev.DeviceIDs)
				sort.Strings(ids)
				must.Eq(t, dev.Name, env["CUDA_VISIBLE_DEVICES"])
				must.Eq(t, dev.Name, env["NVIDIA_VISIBLE_DEVICES"])
				must.Eq(t, strings.Join(ids, ","), env["CARAVAN_GPU_SHARE_IDS"])
				must.NotEq(t, "", env["CARAVAN_GPU_RESERVATION"])
				tokens = append(tokens, env["CARAVAN_GPU_RESERVATION"])
				for _, k := range []string{
					"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
					"CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY",
					"CARAVAN_GPU_MEMORY_FRACTION", "CARAVAN_GPU_MEMORY_LIMIT_BYTES",
					"CARAVAN_GPU_COMPUTE_PERCENT", "CARAVAN_GPU_BACKEND",
				} {
					must.Eq(t, host[k], env[k], must.Sprintf("%s in the %s container", k, d.Name))
				}
				must.Eq(t, "50", env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"])
				must.Eq(t, "0=20480M", env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"])
				must.Eq(t, "simulated", env["CARAVAN_GPU_BACKEND"])
				// The MPS directories are mounted, not just named.
				must.SliceContains(t, lines, fmt.Sprintf("PATH %s dir=true err=<nil>", pipeDir))
				must.SliceContains(t, lines, fmt.Sprintf("PATH %s dir=true err=<nil>", logDir))
			}
			must.NotEq(t, tokens[0], tokens[1])
		})
	}
}

// TestContainers_MissingImage: an image that is not in the runtime's store
// fails the task at once with an error naming it; the pull it attempts goes
// to a closed loopback port (the runtimes' proxy), never off the machine.
// The error must say so: a registry image's pull is refused by the closed
// proxy (scripts/cluster/runtimes.sh's no_pull_proxy; without it the pull
// would go to docker.io), a localhost image's by loopback itself.
func TestContainers_MissingImage(t *testing.T) {
	c := harness.Cluster(t)
	refused := map[string]*regexp.Regexp{
		"localhost/caravan-missing:local": regexp.MustCompile(`dial tcp (127\.0\.0\.1|\[::1\]):\d+: connect: connection refused`),
		"caravan-missing:1":               regexp.MustCompile(`proxyconnect tcp: dial tcp 127\.0\.0\.1:9: connect: connection refused`),
	}
	for _, d := range harness.ContainerRuntimes {
		t.Run(d.Name, func(t *testing.T) {
			c.RequireRuntime(t, d.Client, d.Name)
			for _, image := range []string{"localhost/caravan-missing:local", "caravan-missing:1"} {
				jobID := c.RunJob(t, containerJob, "job_name=e2e-ctr-missing-"+d.Name, "node="+d.Client,
					"runtime="+d.Name, "image="+image, "shares=1")
				start := time.Now()
				stubs := c.WaitAllocs(t, jobID, time.Minute, func(a []*nomadapi.AllocationListStub) bool { return len(a) == 1 })
				alloc := c.WaitAllocStatus(t, stubs[0].ID, "failed", time.Minute)
				var msgs []string
				for _, ev := range alloc.TaskStates[task].Events {
					msgs = append(msgs, ev.Type+": "+ev.DisplayMessage)
				}
				joined := strings.Join(msgs, "\n")
				t.Logf("%s, %s, failed after %s:\n%s", d.Name, image, time.Since(start).Round(time.Millisecond), joined)
				must.StrContains(t, joined, fmt.Sprintf(pullFailure, image))
				must.RegexMatch(t, refused[image], joined, must.Sprintf("%s: the pull was not refused on loopback", image))
				c.StopJob(t, jobID)
			}
		})
	}
}

var finalLine = regexp.MustCompile(`(?m)^final step=\d+ .*params_sha256=[0-9a-f]{64}$`)

// TestContainers_TrainerImage: the FROM scratch trainer image, run to its
// last step by Nomad's docker driver under dockerd and under podman, ends
// with parameters bit for bit equal to the same training run as a host process.
func TestContainers_TrainerImage(t *testing.T) {
	c := harness.Cluster(t)
	c.LoadImages(t)
	args := []string{"trainer", "-steps", "300", "-log-every", "0"}
	out, err := exec.Command(c.Bin, args...).CombinedOutput()
	must.NoError(t, err, must.Sprintf("host trainer: %s", out))
	want := finalLine.FindString(string(out))
	must.NotEq(t, "", want, must.Sprintf("host trainer printed no final line: %s", out))
	// In the container the trainer holds after its last step (-hold), and
	// the test reads its final line from the log while it still runs: a
	// container that exits within seconds can lose its log on the way to
	// Nomad (Nomad's docker driver streaming from podman's Docker API lost
	// it in 3 of 8 runs here).
	ctrArgs := append(append([]string{}, args...), "-hold")
	quoted := make([]string, len(ctrArgs))
	for i, a := range ctrArgs {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	argVar := "trainer_args=[" + strings.Join(quoted, ",") + "]"
	for _, d := range harness.ContainerRuntimes {
		t.Run(d.Name, func(t *testing.T) {
			c.RequireRuntime(t, d.Client, d.Name)
			jobID := c.RunJob(t, trainerJob, "job_name=e2e-ctr-trainer-"+d.Name, "node="+d.Client, "runtime="+d.Name, argVar)
			stubs := c.WaitAllocs(t, jobID, 2*time.Minute, func(a []*nomadapi.AllocationListStub) bool { return len(a) == 1 })
			c.WaitAllocStatus(t, stubs[0].ID, "running", 2*time.Minute)
			var got string
			harness.Eventually(t, 3*time.Minute, func() error {
				got = finalLine.FindString(c.Logs(t, stubs[0].ID, "trainer", "stdout"))
				if got == "" {
					return fmt.Errorf("no final line in the %s container's log yet", d.Name)
				}
				return nil
			})
			c.StopJob(t, jobID)
			must.Eq(t, want, got, must.Sprintf("the %s container's final line against the host process's", d.Name))
		})
	}
}
