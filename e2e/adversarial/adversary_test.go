package adversarial

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// shellJob is the adversarial task's jobspec: a shell script under the
// caravan driver with checkpoints on (group "g", task "t").
const shellJob = "e2e/adversarial/testdata/shell.nomad.hcl"

const (
	group = "g"
	task  = "t"
)

// adversary is one test's job and the host state it must not touch.
type adversary struct {
	c        *harness.C
	job      string
	sentinel string // a directory tree outside every task and the store
	before   string // its hash at the start
}

// newAdversary makes a sentinel tree for the test (files, a subdirectory,
// a symlink) and hashes it; the test's job name is derived from its name.
func newAdversary(t *testing.T) *adversary {
	t.Helper()
	c := harness.Cluster(t)
	name := "adv-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(strings.TrimPrefix(t.Name(), "Test")))
	a := &adversary{c: c, job: name, sentinel: filepath.Join(c.Dir, "sentinel", name)}
	must.NoError(t, os.RemoveAll(a.sentinel))
	must.NoError(t, os.MkdirAll(filepath.Join(a.sentinel, "sub"), 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(a.sentinel, "host-secret"), []byte(`{"sequence": 999, "meta": {"k": "HOST-SECRET"}}`), 0o600))
	must.NoError(t, os.WriteFile(filepath.Join(a.sentinel, "sub", "data"), []byte("host data"), 0o644))
	must.NoError(t, os.Symlink("sub/data", filepath.Join(a.sentinel, "link")))
	a.before = hashTree(t, a.sentinel)
	clean := func() {
		for _, d := range jobDirs(c, name) {
			_ = os.RemoveAll(d)
		}
	}
	clean()
	t.Cleanup(clean)
	return a
}

// untouched asserts the sentinel tree is exactly as it was.
func (a *adversary) untouched(t *testing.T) {
	t.Helper()
	must.Eq(t, a.before, hashTree(t, a.sentinel), must.Sprint("a directory outside the task and the store changed"))
}

// hashTree hashes every path, mode, symlink target and file content below
// dir, without following links.
func hashTree(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		line := fmt.Sprintf("%q %v", rel, info.Mode())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + target
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			line += " " + hex.EncodeToString(sum[:])
		}
		lines = append(lines, line)
		return nil
	})
	must.NoError(t, err)
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:])
}

// run submits the shell job with script; vars are more jobspec variables.
// "${" is escaped from Nomad's interpolation of task config.
func (a *adversary) run(t *testing.T, script string, vars ...string) {
	t.Helper()
	script = strings.ReplaceAll(script, "${", "$${")
	a.c.RunJob(t, shellJob, append([]string{"name=" + a.job, "script=" + script}, vars...)...)
}

// running waits for the job's running allocation (not in exclude).
func (a *adversary) running(t *testing.T, exclude ...string) *nomadapi.AllocationListStub {
	t.Helper()
	skip := map[string]bool{}
	for _, id := range exclude {
		skip[id] = true
	}
	var found *nomadapi.AllocationListStub
	a.c.WaitAllocs(t, a.job, 3*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		for _, x := range as {
			if !skip[x.ID] && x.DesiredStatus == "run" && x.ClientStatus == "running" {
				found = x
				return true
			}
		}
		return false
	})
	return found
}

// logged waits until the task's stdout contains substr. Its error names
// the driver's events too (a failed checkpoint says why there).
func (a *adversary) logged(t *testing.T, allocID, substr string) {
	t.Helper()
	harness.Eventually(t, 2*time.Minute, func() error {
		if out := a.c.Logs(t, allocID, task, "stdout"); !strings.Contains(out, substr) {
			var events []string
			for _, e := range a.c.TaskEvents(t, allocID, task) {
				if e.DriverMessage != "" {
					events = append(events, e.DriverMessage)
				}
			}
			return fmt.Errorf("no %q in the task's stdout yet: %q; driver events: %q", substr, out, events)
		}
		return nil
	})
}

// event waits for a driver event of the allocation containing substr.
func (a *adversary) event(t *testing.T, allocID, substr string) *nomadapi.TaskEvent {
	t.Helper()
	var ev *nomadapi.TaskEvent
	harness.Eventually(t, 2*time.Minute, func() error {
		var seen []string
		for _, e := range a.c.TaskEvents(t, allocID, task) {
			seen = append(seen, e.DriverMessage)
			if e.Type == nomadapi.TaskDriverMessage && strings.Contains(e.DriverMessage, substr) {
				ev = e
				return nil
			}
		}
		return fmt.Errorf("no %q event on %s; events: %q", substr, allocID, seen)
	})
	return ev
}

// noEventContains asserts no event of the allocation contains substr.
func (a *adversary) noEventContains(t *testing.T, allocID, substr string) {
	t.Helper()
	for _, e := range a.c.TaskEvents(t, allocID, task) {
		must.StrNotContains(t, e.DriverMessage+e.DisplayMessage+fmt.Sprint(e.Details), substr)
	}
}

// stopAlloc stops the allocation and returns how long until it is terminal.
func (a *adversary) stopAlloc(t *testing.T, allocID string) time.Duration {
	t.Helper()
	start := time.Now()
	_, err := a.c.CLI(t, "alloc", "stop", "-detach", allocID)
	must.NoError(t, err)
	harness.Eventually(t, 10*time.Minute, func() error {
		al, _, err := a.c.Nomad.Allocations().Info(allocID, nil)
		if err != nil {
			return err
		}
		if !al.ClientTerminalStatus() {
			return fmt.Errorf("allocation %s is %s", allocID, al.ClientStatus)
		}
		return nil
	})
	return time.Since(start)
}

// checkpoint asks for an on-demand checkpoint and waits for its event.
func (a *adversary) checkpoint(t *testing.T, allocID, want string) *nomadapi.TaskEvent {
	t.Helper()
	_, err := a.c.CLI(t, "alloc", "signal", "-s", "SIGUSR1", allocID, task)
	must.NoError(t, err)
	return a.event(t, allocID, want)
}

// jobDirs are the store directories of a job: its name, and its name with a
// job-incarnation suffix where the driver binds checkpoints to one.
func jobDirs(c *harness.C, job string) []string {
	dirs := []string{filepath.Join(c.CheckpointDir, "default", job)}
	for _, sep := range []string{"@", "%40"} {
		m, _ := filepath.Glob(filepath.Join(c.CheckpointDir, "default", job+sep+"*"))
		dirs = append(dirs, m...)
	}
	return dirs
}

// newest returns the newest generation stored for the job (0: none), read
// from the manifests' names (gen-N.json) so that it holds whatever the
// key's layout below the job.
func (a *adversary) newest(t *testing.T) uint64 {
	t.Helper()
	var newest uint64
	for _, d := range jobDirs(a.c, a.job) {
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return nil
			}
			n := strings.TrimSuffix(strings.TrimPrefix(e.Name(), "gen-"), ".json")
			if g, err := strconv.ParseUint(n, 10, 64); err == nil && strings.HasPrefix(e.Name(), "gen-") {
				newest = max(newest, g)
			}
			return nil
		})
	}
	return newest
}

// handler is shell that answers SIGUSR1 by running save (which writes the
// checkpoint files) and then a marker with the next sequence, and loops.
func handler(save string) string {
	return `seq=${CARAVAN_CHECKPOINT_SEQUENCE:-0}
d=$CARAVAN_CHECKPOINT_DIR
on_usr1() {
  seq=$((seq + 1))
  ` + save + `
  printf '{"sequence": %d, "step": %d}' "$seq" "$seq" > "$d/.m.tmp" && mv "$d/.m.tmp" "$d/caravan-checkpoint.json"
}
trap on_usr1 USR1
echo "ready gen=$CARAVAN_CHECKPOINT_GENERATION"
while :; do sleep 0.2; done
`
}
