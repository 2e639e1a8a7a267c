package containers_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// guideMarker precedes, in README.md, the diff a user applies to checkpoint
// their own container.
const guideMarker = "<!-- guide-diff:"

// guideDiff is README.md's bring-your-own-container diff as the two sides
// of one hunk: before (context and removed lines) and after (context and
// added lines).
func guideDiff(t *testing.T, root string) (before, after string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	must.NoError(t, err)
	s := string(b)
	i := strings.Index(s, guideMarker)
	must.Positive(t, i, must.Sprint("README.md has no guide diff marker"))
	s = s[i:]
	start := strings.Index(s, "```diff\n")
	must.Positive(t, start)
	s = s[start+len("```diff\n"):]
	end := strings.Index(s, "```")
	must.Positive(t, end)
	var bb, ab strings.Builder
	for _, line := range strings.SplitAfter(s[:end], "\n") {
		if line == "" {
			continue
		}
		switch line[0] {
		case ' ':
			bb.WriteString(line[1:])
			ab.WriteString(line[1:])
		case '-':
			bb.WriteString(line[1:])
		case '+':
			ab.WriteString(line[1:])
		default:
			t.Fatalf("README.md's guide diff: line %q has no diff marker", line)
		}
	}
	return bb.String(), ab.String()
}

// userJobspec is a user's own jobspec around the diff's context: its job
// block, the diff's side, then a constraint pinning it to client.
func userJobspec(jobID, side, client string) string {
	return fmt.Sprintf("job %q {\n  datacenters = [\"dc1\"]\n  type        = \"service\"\n\n%s"+
		"    constraint {\n      attribute = \"${node.unique.name}\"\n      value     = %q\n    }\n  }\n}\n", jobID, side, client)
}

// sumOf adds up the values of an HCL attribute (cpu, memory) in text.
func sumOf(t *testing.T, text, attr string) int {
	t.Helper()
	n := 0
	for _, m := range regexp.MustCompile(`(?m)^\s*`+attr+`\s*=\s*(\d+)\s*$`).FindAllStringSubmatch(text, -1) {
		v, err := strconv.Atoi(m[1])
		must.NoError(t, err)
		n += v
	}
	must.Positive(t, n, must.Sprintf("no %s in the jobspec", attr))
	return n
}

// buildUserImage builds, with podman in a storage of the test's own, a
// FROM scratch image of the reference trainer under another path, name and
// entrypoint than caravan's image (not with caravan's images script), and
// returns the environment that points podman at that storage.
func buildUserImage(t *testing.T, root, image string) []string {
	t.Helper()
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	for _, d := range []string{"root", "run", "tmp", "ctx"} {
		must.NoError(t, os.MkdirAll(filepath.Join(store, d), 0o755))
	}
	files := map[string]string{
		"storage.conf":    fmt.Sprintf("[storage]\ndriver = \"overlay\"\ngraphroot = %q\nrunroot = %q\n", store+"/root", store+"/run"),
		"registries.conf": "unqualified-search-registries = []\nshort-name-mode = \"disabled\"\n",
		"containers.conf": fmt.Sprintf("[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"none\"\ntmp_dir = %q\n", store+"/tmp"),
	}
	for name, text := range files {
		must.NoError(t, os.WriteFile(filepath.Join(store, name), []byte(text), 0o644))
	}
	env := append(os.Environ(), "CONTAINERS_STORAGE_CONF="+store+"/storage.conf",
		"CONTAINERS_REGISTRIES_CONF="+store+"/registries.conf", "CONTAINERS_CONF="+store+"/containers.conf",
		"HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9", "NO_PROXY=")
	ctx := filepath.Join(store, "ctx")
	containerfile := "FROM scratch\nCOPY my-trainer /usr/local/bin/my-trainer\n" +
		`ENTRYPOINT ["/usr/local/bin/my-trainer", "trainer", "-step-delay", "4ms", "-log-every", "1000", "-hold"]` + "\n"
	must.NoError(t, os.WriteFile(filepath.Join(ctx, "Containerfile"), []byte(containerfile), 0o644))
	run(t, root, append(os.Environ(), "CGO_ENABLED=0"), "go", "build", "-trimpath", "-o", filepath.Join(ctx, "my-trainer"), "./trainer/image")
	run(t, root, env, "podman", "build", "-q", "-f", filepath.Join(ctx, "Containerfile"), "-t", image, ctx)
	return env
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	must.NoError(t, cmd.Run(), must.Sprintf("%s %s: %s", name, strings.Join(args, " "), out.String()))
	return out.String()
}

// TestContainers_OwnImageGuide follows README.md's bring-your-own-container
// guide: an image caravan did not build (podman build of the test's own
// FROM scratch image), loaded by the documented command (`scripts/cluster.sh
// images NAME`) into both runtimes, and a user's jobspec with the README's
// diff applied (read from the README, so the two cannot drift). Under
// dockerd (client1) and under podman (client2) the job checkpoints on
// suspension (scale 0) and resumes from the saved step (scale 1), and Nomad
// reserves for the allocation exactly the CPU and memory the diff's
// jobspec asks for (the role tasks' resources included, not Nomad's
// defaults of 100 MHz and 300 MiB each).
func TestContainers_OwnImageGuide(t *testing.T) {
	c := harness.Cluster(t)
	before, after := guideDiff(t, c.Root)
	m := regexp.MustCompile(`image\s*=\s*"([^"]+)"`).FindStringSubmatch(before)
	must.SliceLen(t, 2, m, must.Sprint("the guide's jobspec names no image"))
	image := m[1]
	must.StrNotContains(t, image, "caravan-", must.Sprint("the guide's image must not be one of caravan's"))
	env := buildUserImage(t, c.Root, image)
	out := run(t, c.Root, append(env, "CARAVAN_CLUSTER_DIR="+c.Dir), filepath.Join(c.Root, "scripts", "cluster.sh"), "images", image)
	for _, rt := range []string{"dockerd", "podman"} {
		must.True(t, strings.Contains(out, "loaded "+image+" into "+rt) || strings.Contains(out, image+" already in "+rt),
			must.Sprintf("scripts/cluster.sh images %s did not load it into %s: %s", image, rt, out))
	}
	wantCPU, wantMem := sumOf(t, after, "cpu"), sumOf(t, after, "memory")

	for _, d := range harness.ContainerRuntimes {
		t.Run(d.Name, func(t *testing.T) {
			c.RequireRuntime(t, d.Client, d.Name)
			// A fresh job ID: no checkpoint of an earlier run to restore.
			jobID := fmt.Sprintf("e2e-guide-%s-%d", d.Name, time.Now().Unix())
			user := userJobspec(jobID, before, d.Client)
			must.StrContains(t, user, before)
			applied := strings.Replace(user, before, after, 1)
			path := filepath.Join(t.TempDir(), "my-train.nomad.hcl")
			must.NoError(t, os.WriteFile(path, []byte(applied), 0o644))
			must.Eq(t, jobID, c.RunJob(t, path))

			a1 := liveAlloc(t, c, jobID, nil)
			alloc, _, err := c.Nomad.Allocations().Info(a1, nil)
			must.NoError(t, err)
			cpu, mem := 0, 0
			for _, tr := range alloc.AllocatedResources.Tasks {
				cpu += int(tr.Cpu.CpuShares)
				mem += int(tr.Memory.MemoryMB)
			}
			must.Eq(t, wantCPU, cpu, must.Sprint("MHz Nomad reserved for the allocation against the guide's jobspec"))
			must.Eq(t, wantMem, mem, must.Sprint("MiB Nomad reserved for the allocation against the guide's jobspec"))

			c.WaitDriverEvent(t, a1, "restore", "No checkpoint under")
			harness.Eventually(t, 2*time.Minute, func() error {
				if !progressLine.MatchString(c.Logs(t, a1, "trainer", "stdout")) {
					return fmt.Errorf("no training progress in %s yet", a1)
				}
				return nil
			})
			// Nomad refuses a scale while the service job's deployment
			// runs (the shipped jobspec turns deployments off; a user's
			// jobspec has one): wait for it, as `nomad job run` does.
			waitDeployment(t, c, jobID)
			_, err = c.CLI(t, "job", "scale", jobID, trainGroup, "0")
			must.NoError(t, err)
			saved := c.WaitDriverEvent(t, a1, "commit", "Checkpoint saved (exit)")
			c.WaitAllocStatus(t, a1, "complete", 2*time.Minute)
			_, err = c.CLI(t, "job", "scale", jobID, trainGroup, "1")
			must.NoError(t, err)
			a2 := liveAlloc(t, c, jobID, map[string]bool{a1: true})
			restored := c.WaitDriverEvent(t, a2, "restore", "Checkpoint restored")
			must.Eq(t, saved.Details["generation"], restored.Details["generation"])
			harness.Eventually(t, 2*time.Minute, func() error {
				if log := c.Logs(t, a2, "trainer", "stdout"); !strings.Contains(log, "resumed step="+saved.Details["step"]+" ") {
					return fmt.Errorf("the resumed container has not reported step %s yet", saved.Details["step"])
				}
				return nil
			})
			t.Logf("%s: %s (not caravan's) reserved %d MHz / %d MiB as the guide's jobspec asks; suspended at step %s, resumed from it",
				d.Name, image, cpu, mem, saved.Details["step"])
		})
	}
}

// TestGuideDiff_RoleTasksHaveResources: the README's diff gives each of its
// caravan tasks resources of its own (without, each takes Nomad's default
// of 100 MHz and 300 MiB), and the job a reschedule policy that survives
// moves. Needs no cluster.
func TestGuideDiff_RoleTasksHaveResources(t *testing.T) {
	_, after := guideDiff(t, filepath.Join("..", ".."))
	tasks := regexp.MustCompile(`(?m)^    task "`).Split(after, -1)[1:]
	must.SliceLen(t, 3, tasks)
	for _, task := range tasks {
		must.StrContains(t, task, "resources {", must.Sprintf("task %q", strings.SplitN(task, "\n", 2)[0]))
	}
	must.Eq(t, 140, sumOf(t, after, "cpu"))
	must.Eq(t, 128, sumOf(t, after, "memory"))
	must.StrContains(t, after, "unlimited      = true")
}

// waitDeployment waits until the job's latest deployment succeeded.
func waitDeployment(t *testing.T, c *harness.C, jobID string) {
	t.Helper()
	harness.Eventually(t, 3*time.Minute, func() error {
		d, _, err := c.Nomad.Jobs().LatestDeployment(jobID, nil)
		switch {
		case err != nil:
			return err
		case d == nil:
			return fmt.Errorf("job %s has no deployment yet", jobID)
		case d.Status != "successful":
			return fmt.Errorf("job %s's deployment is %s (%s)", jobID, d.Status, d.StatusDescription)
		}
		return nil
	})
}
