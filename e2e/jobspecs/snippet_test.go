package jobspecs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// snippetMark ends the snippet's lines an operator (or this test) changes
// per machine: `# e2e: <what>`.
var snippetMark = regexp.MustCompile(`(?m)^(.*?)\s*# e2e: ([a-z_]+)$`)

// simulatedGPUs stand in for the snippet's NVML GPUs: an H100 (which the
// snippet's share_override makes one whole share) and an A100 of 4 shares.
const simulatedGPUs = `backend = "simulated"
    simulated {
      seed = "snippet"
      gpu {
        model      = "NVIDIA H100 80GB HBM3"
        memory_mib = 81920
      }
      gpu {
        model      = "NVIDIA A100-SXM4-40GB"
        memory_mib = 40960
      }
    }`

// renderSnippet returns jobspecs/agent/client-plugins.hcl with its marked
// lines, and only those, replaced for agent a; the test fails if the
// snippet's marked lines are not exactly these.
func renderSnippet(t *testing.T, a *harness.Agent) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(a.C.Root, "jobspecs", "agent", "client-plugins.hcl"))
	must.NoError(t, err)
	runtimes := filepath.Join(a.C.Dir, "runtimes")
	with := map[string]string{
		"data_dir":         fmt.Sprintf("data_dir = %q", filepath.Join(a.Dir, "data")),
		"plugin_dir":       fmt.Sprintf("plugin_dir = %q", filepath.Join(a.Dir, "plugins")),
		"backend":          simulatedGPUs,
		"checkpoint_store": fmt.Sprintf("checkpoint_store = %q", a.C.CheckpointDir),
		// The cluster's daemons (scripts/cluster/runtimes.sh).
		"endpoint":        fmt.Sprintf("endpoint = %q", "unix://"+filepath.Join(runtimes, "docker", "docker.sock")),
		"docker_endpoint": fmt.Sprintf("docker_endpoint = %q", "unix://"+filepath.Join(runtimes, "docker", "docker.sock")),
		"socket_path":     fmt.Sprintf("socket_path = %q", "unix://"+filepath.Join(runtimes, "podman", "podman.sock")),
		// Simulated GPUs: no NVIDIA runtime registered with dockerd.
		"nvidia_runtime": `nvidia_runtime = "runc"`,
	}
	seen := map[string]int{}
	out := snippetMark.ReplaceAllStringFunc(string(src), func(line string) string {
		m := snippetMark.FindStringSubmatch(line)
		seen[m[2]]++
		key := strings.TrimSpace(strings.SplitN(m[1], "=", 2)[0])
		must.Eq(t, m[2], key, must.Sprintf("the mark on %q names its own setting", line))
		return strings.Repeat(" ", len(m[1])-len(strings.TrimLeft(m[1], " "))) + with[m[2]]
	})
	for k := range with {
		must.Eq(t, 1, seen[k], must.Sprintf("snippet lines marked %q", k))
	}
	must.MapLen(t, len(with), seen, must.Sprint("the snippet marks only the lines this test replaces"))
	return out
}

// TestJobspecs_RunOnSnippetClient starts a Nomad client from the shipped
// client snippet (only its marked lines changed: paths and the cluster's
// container sockets, and the simulated GPUs in place of NVML, with the
// docker driver's nvidia_runtime for a machine without GPUs) and runs the
// jobspecs on it: hello, gpu-whole, gpu-fraction, train-checkpointed and the
// checkpointed trainer container under the docker driver to completion or
// running, and every other jobspec through `nomad job plan`
// (placement only: the planner and the PyTorch trainers need Consul
// services and Python this node lacks). The snippet's block for Nomad's
// podman driver plugin stays in it, for users who install that plugin; it
// is not built here (no build free of BUSL-1.1 code), so Nomad skips it.
func TestJobspecs_RunOnSnippetClient(t *testing.T) {
	c := harness.Cluster(t)
	c.LoadImages(t)
	a := harness.NewAgent(t, c, "snippet", 0)
	a.Start(t, renderSnippet(t, a))
	node := a.WaitNode(t, 2*time.Minute)
	ac := a.C
	harness.Eventually(t, time.Minute, func() error {
		n, _, err := ac.Nomad.Nodes().Info(node.ID, nil)
		if err != nil {
			return err
		}
		for _, d := range []string{"raw_exec", "caravan", "docker"} {
			if di := n.Drivers[d]; di == nil || !di.Healthy {
				return fmt.Errorf("driver %s not healthy yet: %+v", d, di)
			}
		}
		if n.NodeResources == nil || len(n.NodeResources.Devices) != 2 {
			return fmt.Errorf("GPUs not fingerprinted yet")
		}
		return nil
	})

	// Placement of the jobspecs the node cannot run to the end here.
	bin := ac.Bin
	plans := map[string][]string{
		"gpu-model.nomad.hcl":             {"model=NVIDIA A100-SXM4-40GB"},
		"planner.nomad.hcl":               {"caravan_bin=" + bin, "count=1"},
		"planner-train-sim.nomad.hcl":     {"name=sim", "caravan_bin=" + bin, "state_dir=" + ac.CheckpointDir, "count=1"},
		"planner-train.nomad.hcl":         {"name=real", "caravan_bin=" + bin, "count=1"},
		"train-elastic.nomad.hcl":         {"name=elastic", "caravan_bin=" + bin, "workers=1", "ps=1"},
		"train-pytorch.nomad.hcl":         {"nodes=snippet"},
		"train-pytorch-elastic.nomad.hcl": {"name=pte", "nodes=snippet", "workers=1"},
	}
	for f, vars := range plans {
		t.Run("plan "+f, func(t *testing.T) {
			args := []string{"job", "plan"}
			for _, v := range vars {
				args = append(args, "-var", v)
			}
			out, err := ac.CLI(t, append(args, filepath.Join(ac.Root, "jobspecs", f))...)
			// Exit 1 means "allocations would be created": the success case.
			if err != nil && !strings.Contains(err.Error(), "exit status 1") {
				t.Fatalf("plan %s: %v", f, err)
			}
			must.StrNotContains(t, out, "Failed to place")
			must.StrContains(t, out, "create")
		})
	}

	t.Run("run hello", func(t *testing.T) {
		id := ac.RunJob(t, "jobspecs/hello.nomad.hcl", "node=snippet")
		allocs := ac.WaitAllocs(t, id, 2*time.Minute, allIn(nomadapi.AllocClientStatusComplete))
		must.StrContains(t, ac.Logs(t, allocs[0].ID, "hello", "stdout"), "hello from snippet")
	})
	t.Run("run gpu-whole on the H100", func(t *testing.T) {
		id := ac.RunJob(t, "jobspecs/gpu-whole.nomad.hcl", "node=snippet", "gpu_shares=1")
		ac.WaitAllocs(t, id, 2*time.Minute, allIn(nomadapi.AllocClientStatusRunning))
	})
	t.Run("run gpu-fraction on the A100", func(t *testing.T) {
		id := ac.RunJob(t, "jobspecs/gpu-fraction.nomad.hcl", "node=snippet", "shares=2")
		ac.WaitAllocs(t, id, 2*time.Minute, allIn(nomadapi.AllocClientStatusRunning))
	})
	t.Run("run train-container", func(t *testing.T) {
		id := ac.RunJob(t, "jobspecs/train-container.nomad.hcl", "job_name=snippet-train-docker", "node=snippet",
			"steps=300", "step_delay=1ms")
		allocs := ac.WaitAllocs(t, id, 2*time.Minute, allIn(nomadapi.AllocClientStatusRunning))
		harness.Eventually(t, 2*time.Minute, func() error {
			if log := ac.Logs(t, allocs[0].ID, "trainer", "stdout"); !strings.Contains(log, "final step=300 ") {
				return fmt.Errorf("no final line in the docker container's log yet")
			}
			return nil
		})
		ac.StopJob(t, id)
	})
	t.Run("run train-checkpointed", func(t *testing.T) {
		id := ac.RunJob(t, "jobspecs/train-checkpointed.nomad.hcl", "caravan_bin="+bin, "nodes=snippet",
			"steps=300", "step_delay=1ms")
		ac.WaitAllocs(t, id, 3*time.Minute, allIn(nomadapi.AllocClientStatusComplete))
	})
}

func allIn(status string) func([]*nomadapi.AllocationListStub) bool {
	return func(allocs []*nomadapi.AllocationListStub) bool {
		if len(allocs) == 0 {
			return false
		}
		for _, a := range allocs {
			if a.ClientStatus != status {
				return false
			}
		}
		return true
	}
}
