package driver

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

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/e2e/harness"
)

const (
	identitySpec = "e2e/driver/testdata/identity.nomad.hcl"
	identityJob  = "ckpt-identity"
	identityKey  = "ckpt-identity-e2e"
)

var resumedRe = regexp.MustCompile(`resumed step=(\d+)`)

// identitySetup removes the identity job's checkpoints (every incarnation,
// and the key override) before and after the test.
func identitySetup(t *testing.T, c *harness.C) {
	t.Helper()
	clean := func() {
		dirs, _ := filepath.Glob(filepath.Join(c.CheckpointDir, "default", identityJob+"*"))
		dirs = append(dirs, filepath.Join(c.CheckpointDir, "default", identityKey))
		for _, d := range dirs {
			_ = os.RemoveAll(d)
		}
	}
	setup(t, c)
	clean()
	t.Cleanup(clean)
}

// runIdentity runs the identity jobspec.
func runIdentity(t *testing.T, c *harness.C, vars ...string) {
	t.Helper()
	c.RunJob(t, identitySpec, append([]string{"caravan_bin=" + c.Bin}, vars...)...)
}

// runningAllocs waits for n running allocations of the identity job not in
// exclude, each printing progress, and returns them.
func runningAllocs(t *testing.T, c *harness.C, n int, exclude map[string]bool) []*nomadapi.AllocationListStub {
	t.Helper()
	live := func(as []*nomadapi.AllocationListStub) []*nomadapi.AllocationListStub {
		var out []*nomadapi.AllocationListStub
		for _, a := range as {
			if !exclude[a.ID] && a.DesiredStatus == "run" && a.ClientStatus == "running" {
				out = append(out, a)
			}
		}
		return out
	}
	allocs := live(c.WaitAllocs(t, identityJob, 3*time.Minute, func(as []*nomadapi.AllocationListStub) bool {
		return len(live(as)) == n
	}))
	for _, a := range allocs {
		harness.Eventually(t, time.Minute, func() error {
			if !strings.Contains(c.Logs(t, a.ID, task, "stdout"), "step=") {
				return fmt.Errorf("no progress in %s yet", a.ID)
			}
			return nil
		})
	}
	return allocs
}

// identityEvent waits for an event of the identity job's allocation
// containing one of substrs.
func identityEvent(t *testing.T, c *harness.C, allocID string, substrs ...string) *nomadapi.TaskEvent {
	t.Helper()
	var ev *nomadapi.TaskEvent
	harness.Eventually(t, 2*time.Minute, func() error {
		var seen []string
		for _, e := range c.TaskEvents(t, allocID, task) {
			seen = append(seen, e.Type+": "+e.DriverMessage)
			for _, s := range substrs {
				if e.Type == nomadapi.TaskDriverMessage && strings.Contains(e.DriverMessage, s) {
					ev = e
					return nil
				}
			}
		}
		return fmt.Errorf("no %q event on %s; events: %q", substrs, allocID, seen)
	})
	return ev
}

// allocKeyOf is the store key of the identity job's index 0 in the
// incarnation with create index ci.
func allocKeyOf(ci uint64) string {
	return fmt.Sprintf("default/%s@%d/%s/%s/0", identityJob, ci, group, task)
}

func createIndex(t *testing.T, c *harness.C) uint64 {
	t.Helper()
	job, _, err := c.Nomad.Jobs().Info(identityJob, nil)
	must.NoError(t, err)
	return *job.CreateIndex
}

// purge stops and purges the identity job the way an operator does, and
// waits until the stop checkpoint of key is in the store (Nomad forgets
// purged allocations at once, with their events).
func purge(t *testing.T, c *harness.C, key string) *store.Manifest {
	t.Helper()
	k, err := store.ParseKey(key)
	must.NoError(t, err)
	st, err := store.Open(c.CheckpointDir, store.Options{})
	must.NoError(t, err)
	var before uint64
	if m, err := st.Latest(k); err == nil {
		before = m.Generation
	}
	_, err = c.CLI(t, "job", "stop", "-purge", "-detach", identityJob)
	must.NoError(t, err)
	var m *store.Manifest
	harness.Eventually(t, 2*time.Minute, func() error {
		if m, err = st.Latest(k); err != nil {
			return err
		}
		if m.Generation <= before || m.Meta["reason"] != "stop" {
			return fmt.Errorf("no stop checkpoint of %s after generation %d yet", key, before)
		}
		return nil
	})
	return m
}

// checkpointCLI runs `caravan checkpoint` against the cluster's store.
func checkpointCLI(t *testing.T, c *harness.C, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(c.Bin, append([]string{"checkpoint"}, args...)...)
	cmd.Env = append(os.Environ(), "CARAVAN_CHECKPOINT_STORE="+c.CheckpointDir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestIdentity_GroupScopeScale20 runs a data-parallel group of 2 with
// scope = "group": both allocations checkpoint one shared key on scale to 0
// (a late, older commit is refused as stale), and after scale 0 -> 2 both
// restore the same newest state.
func TestIdentity_GroupScopeScale20(t *testing.T) {
	c := harness.Cluster(t)
	identitySetup(t, c)
	runIdentity(t, c, "count=2", "scope=group")
	first := runningAllocs(t, c, 2, nil)
	ci := createIndex(t, c)
	groupKey := fmt.Sprintf("default/%s@%d/%s/%s/group", identityJob, ci, group, task)
	for _, a := range first {
		identityEvent(t, c, a.ID, "No checkpoint under "+groupKey)
	}

	_, err := c.CLI(t, "job", "scale", identityJob, group, "0")
	must.NoError(t, err)
	maxStep := -1
	for _, a := range first {
		ev := identityEvent(t, c, a.ID, "Checkpoint saved (stop)", "Stale checkpoint skipped (stop)")
		t.Logf("%s: %s", a.ID[:8], ev.DriverMessage)
		if step, err := strconv.Atoi(ev.Details["step"]); err == nil && ev.Details["stale"] == "" {
			maxStep = max(maxStep, step)
		}
		c.WaitTerminal(t, a.ID, 3*time.Minute)
	}
	out, err := checkpointCLI(t, c, "show", groupKey)
	must.NoError(t, err, must.Sprint(out))
	t.Logf("caravan checkpoint show %s:\n%s", groupKey, out)

	_, err = c.CLI(t, "job", "scale", identityJob, group, "2")
	must.NoError(t, err)
	exclude := map[string]bool{first[0].ID: true, first[1].ID: true}
	second := runningAllocs(t, c, 2, exclude)
	var gens, steps []string
	for _, a := range second {
		ev := identityEvent(t, c, a.ID, "Checkpoint restored")
		gens = append(gens, ev.Details["generation"])
		m := resumedRe.FindStringSubmatch(c.Logs(t, a.ID, task, "stdout"))
		must.SliceLen(t, 2, m, must.Sprintf("%s did not resume", a.ID))
		steps = append(steps, m[1])
	}
	must.Eq(t, gens[0], gens[1], must.Sprint("the two allocations restored different generations"))
	must.Eq(t, steps[0], steps[1], must.Sprint("the two allocations resumed different steps"))
	must.Eq(t, strconv.Itoa(maxStep), steps[0], must.Sprint("not the newest state"))
}

// TestIdentity_PurgeStartsFreshKeyResumes: a job purged and run again starts
// fresh (a new incarnation); with checkpoint.key set it resumes. The
// operator CLI lists and deletes the key, after which the keyed job starts
// fresh too.
func TestIdentity_PurgeStartsFreshKeyResumes(t *testing.T) {
	c := harness.Cluster(t)
	identitySetup(t, c)

	// Unkeyed: purge + run again starts at step 0.
	runIdentity(t, c)
	a1 := runningAllocs(t, c, 1, nil)[0]
	ci1 := createIndex(t, c)
	purge(t, c, allocKeyOf(ci1))
	runIdentity(t, c)
	a2 := runningAllocs(t, c, 1, map[string]bool{a1.ID: true})[0]
	ci2 := createIndex(t, c)
	must.NotEq(t, ci1, ci2)
	identityEvent(t, c, a2.ID, "No checkpoint under "+allocKeyOf(ci2))
	logs := c.Logs(t, a2.ID, task, "stdout")
	must.StrNotContains(t, logs, "resumed")
	must.StrContains(t, logs, "start_step=0", must.Sprint("the run did not start at step 0"))
	purge(t, c, allocKeyOf(ci2))

	// Keyed: purge + run again resumes.
	runIdentity(t, c, "key="+identityKey)
	b1 := runningAllocs(t, c, 1, nil)[0]
	keyName := fmt.Sprintf("default/%s/%s/%s/0", identityKey, group, task)
	identityEvent(t, c, b1.ID, "No checkpoint under "+keyName)
	saved := purge(t, c, keyName)
	runIdentity(t, c, "key="+identityKey)
	b2 := runningAllocs(t, c, 1, map[string]bool{b1.ID: true})[0]
	restored := identityEvent(t, c, b2.ID, "Checkpoint restored")
	must.Eq(t, strconv.FormatUint(saved.Generation, 10), restored.Details["generation"])
	must.StrContains(t, c.Logs(t, b2.ID, task, "stdout"), "resumed step="+saved.Meta["step"])

	// The operator's view: every key of the job, then delete the keyed one.
	out, err := checkpointCLI(t, c, "list")
	must.NoError(t, err, must.Sprint(out))
	t.Logf("caravan checkpoint list:\n%s", out)
	for _, k := range []string{allocKeyOf(ci1), allocKeyOf(ci2), keyName} {
		must.StrContains(t, out, k)
	}
	purge(t, c, keyName)
	out, err = checkpointCLI(t, c, "delete", "-gc", keyName)
	must.NoError(t, err, must.Sprint(out))
	must.StrContains(t, out, "deleted "+keyName)
	out, err = checkpointCLI(t, c, "delete", keyName)
	must.Error(t, err)
	must.StrContains(t, out, "nothing deleted")
	out, err = checkpointCLI(t, c, "list")
	must.NoError(t, err)
	must.StrNotContains(t, out, keyName)

	runIdentity(t, c, "key="+identityKey)
	b3 := runningAllocs(t, c, 1, map[string]bool{b1.ID: true, b2.ID: true})[0]
	identityEvent(t, c, b3.ID, "No checkpoint under "+keyName)
	must.StrNotContains(t, c.Logs(t, b3.ID, task, "stdout"), "resumed")
}
