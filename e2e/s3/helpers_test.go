package s3

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	trainSpec = "jobspecs/train-checkpointed.nomad.hcl"
	trainJob  = "train-checkpointed"
	trainTask = "trainer"
	// steps and stepDelay make an uninterrupted run last about 20s.
	steps     = 10000
	stepDelay = "2ms"
)

var finalRe = regexp.MustCompile(`final step=(\d+) .* params_sha256=([0-9a-f]{64})`)

// s3Cluster is the shared cluster, which must run the S3 store, with both
// clients eligible and undrained again when the test ends.
func s3Cluster(t *testing.T) (*harness.C, harness.S3) {
	t.Helper()
	c := harness.Cluster(t)
	s := c.S3(t)
	reset := func() {
		for _, cl := range c.Clients {
			_, _ = c.Nomad.Nodes().UpdateDrain(cl.NodeID, nil, true, nil)
			_, _ = c.Nomad.Nodes().ToggleEligibility(cl.NodeID, true, nil)
		}
	}
	reset()
	t.Cleanup(reset)
	return c, s
}

// reference runs the same training uninterrupted, outside Nomad.
func reference(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "trainer", "-steps", strconv.Itoa(steps), "-log-every", "0", "-checkpoint-dir", "").CombinedOutput()
	must.NoError(t, err, must.Sprint(string(out)))
	m := finalRe.FindStringSubmatch(string(out))
	must.SliceLen(t, 3, m, must.Sprint(string(out)))
	return m[2]
}

// runTrainer runs the checkpointed trainer on c (the cluster or a
// standalone agent) and, when the test ends, stops it and waits for its
// allocations to stop before the harness purges it.
func runTrainer(t *testing.T, c *harness.C, vars ...string) {
	t.Helper()
	id := c.RunJob(t, trainSpec, append([]string{"caravan_bin=" + c.Bin, "steps=" + strconv.Itoa(steps),
		"step_delay=" + stepDelay}, vars...)...)
	t.Cleanup(func() { // before the harness's purge (cleanups are LIFO)
		if _, _, err := c.Nomad.Jobs().Deregister(id, false, nil); err != nil {
			return
		}
		harness.Eventually(t, 2*time.Minute, func() error { return allStopped(c, id) })
	})
}

func allStopped(c *harness.C, id string) error {
	allocs, _, err := c.Nomad.Jobs().Allocations(id, true, nil)
	if err != nil {
		return err
	}
	for _, a := range allocs {
		if a.ClientStatus == "running" || a.ClientStatus == "pending" {
			return fmt.Errorf("allocation %s is still %s", a.ID, a.ClientStatus)
		}
	}
	return nil
}

// running waits for the trainer's allocation not in exclude to run and
// print progress.
func running(t *testing.T, c *harness.C, exclude map[string]bool) *nomadapi.AllocationListStub {
	t.Helper()
	var a *nomadapi.AllocationListStub
	c.WaitAllocs(t, trainJob, 3*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		for _, x := range as {
			if !exclude[x.ID] && x.DesiredStatus == "run" && x.ClientStatus == "running" {
				a = x
				return true
			}
		}
		return false
	})
	harness.Eventually(t, time.Minute, func() error {
		if out, _ := c.CLI(t, "alloc", "logs", a.ID, trainTask); !strings.Contains(out, "step=") {
			return fmt.Errorf("no progress in %s yet", a.ID)
		}
		return nil
	})
	return a
}

// event waits for a driver event of the allocation containing substr.
func event(t *testing.T, c *harness.C, allocID, substr string) *nomadapi.TaskEvent {
	t.Helper()
	var ev *nomadapi.TaskEvent
	harness.Eventually(t, 2*time.Minute, func() error {
		ev = findEvent(t, c, allocID, substr)
		if ev == nil {
			return fmt.Errorf("no %q event on %s; events: %q", substr, allocID, eventTexts(t, c, allocID))
		}
		return nil
	})
	return ev
}

func findEvent(t *testing.T, c *harness.C, allocID, substr string) *nomadapi.TaskEvent {
	t.Helper()
	for _, e := range c.TaskEvents(t, allocID, trainTask) {
		if e.Type == nomadapi.TaskDriverMessage && strings.Contains(e.DriverMessage, substr) {
			return e
		}
	}
	return nil
}

func countEvents(t *testing.T, c *harness.C, allocID, substr string) int {
	t.Helper()
	n := 0
	for _, e := range c.TaskEvents(t, allocID, trainTask) {
		if e.Type == nomadapi.TaskDriverMessage && strings.Contains(e.DriverMessage, substr) {
			n++
		}
	}
	return n
}

func eventTexts(t *testing.T, c *harness.C, allocID string) []string {
	t.Helper()
	var seen []string
	for _, e := range c.TaskEvents(t, allocID, trainTask) {
		seen = append(seen, e.Type+": "+e.DisplayMessage)
	}
	return seen
}

func waitTerminal(t *testing.T, c *harness.C, allocID string, timeout time.Duration) {
	t.Helper()
	harness.Eventually(t, timeout, func() error {
		a, _, err := c.Nomad.Allocations().Info(allocID, nil)
		if err != nil {
			return err
		}
		if !a.ClientTerminalStatus() {
			return fmt.Errorf("allocation %s is %s", allocID, a.ClientStatus)
		}
		return nil
	})
}

func eligible(t *testing.T, c *harness.C, name string, on bool) {
	t.Helper()
	_, err := c.Nomad.Nodes().ToggleEligibility(c.Client(t, name).NodeID, on, nil)
	must.NoError(t, err)
}

func nodeName(t *testing.T, c *harness.C, nodeID string) string {
	t.Helper()
	for _, cl := range c.Clients {
		if cl.NodeID == nodeID {
			return cl.Name
		}
	}
	t.Fatalf("unknown node %s", nodeID)
	return ""
}

// finish waits for the service job's allocation to finish training and
// hold, and compares its parameters with the uninterrupted run's.
func finish(t *testing.T, c *harness.C, allocID, want string) {
	t.Helper()
	harness.Eventually(t, 3*time.Minute, func() error {
		if logs := c.Logs(t, allocID, trainTask, "stdout"); !strings.Contains(logs, "holding:") {
			return fmt.Errorf("%s has not finished training", allocID)
		}
		return nil
	})
	logs := c.Logs(t, allocID, trainTask, "stdout")
	m := finalRe.FindStringSubmatch(logs)
	must.SliceLen(t, 3, m, must.Sprint(logs))
	must.Eq(t, strconv.Itoa(steps), m[1])
	must.Eq(t, want, m[2], must.Sprint("final parameters differ from the uninterrupted run"))
}

var keyRe = regexp.MustCompile(`<Key>([^<]*)</Key>`)

// bucketKeys lists (with the admin's keys) the object names below prefix.
func bucketKeys(t *testing.T, s harness.S3, prefix string) []string {
	t.Helper()
	ak, sk := harness.Credentials(t, s.AdminCredentialsFile)
	var keys []string
	token := ""
	for {
		q := "?list-type=2&prefix=" + strings.ReplaceAll(prefix, "/", "%2F")
		if token != "" {
			q = "?continuation-token=" + urlEscape(token) + "&list-type=2&prefix=" + strings.ReplaceAll(prefix, "/", "%2F")
		}
		code, body := s.Request(t, ak, sk, "GET", s.Bucket+q, nil)
		must.Eq(t, 200, code, must.Sprint(body))
		for _, m := range keyRe.FindAllStringSubmatch(body, -1) {
			keys = append(keys, m[1])
		}
		next := regexp.MustCompile(`<NextContinuationToken>([^<]*)</NextContinuationToken>`).FindStringSubmatch(body)
		if next == nil {
			return keys
		}
		token = next[1]
	}
}

// urlEscape encodes s as SigV4 wants query values encoded.
func urlEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-_.~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// noSharedDirectory checks that the clients' driver plugins have no
// checkpoint directory: their config has a store block and no
// checkpoint_store, and no checkpoint lands in the cluster's directory.
func noSharedDirectory(t *testing.T, c *harness.C, s harness.S3) {
	t.Helper()
	for _, cl := range c.Clients {
		b, err := os.ReadFile(filepath.Join(c.Dir, "config", cl.Name+".hcl"))
		must.NoError(t, err)
		must.StrNotContains(t, string(b), "checkpoint_store")
		must.StrContains(t, string(b), "credentials_file = \""+s.CredentialsFile+"\"")
	}
	local, _ := filepath.Glob(filepath.Join(c.CheckpointDir, "default", trainJob+"*"))
	must.SliceEmpty(t, local, must.Sprint("checkpoints in the cluster's directory"))
}
