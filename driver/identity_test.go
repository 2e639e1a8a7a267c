package driver

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
)

func TestCheckpointKey(t *testing.T) {
	alloc := func(idx string) map[string]string { return map[string]string{"NOMAD_ALLOC_INDEX": idx} }
	cases := []struct {
		name        string
		env         map[string]string
		scope, key  string
		incarnation string
		want        string
		wantErr     string
	}{
		{"alloc scope", alloc("4"), ScopeAlloc, "", "12", "default/%2E.%2F..%2Fetc@12/g/t/4", ""},
		{"index from alloc name", map[string]string{"NOMAD_ALLOC_NAME": "my.job.grp[12]"}, ScopeAlloc, "", "12", "default/%2E.%2F..%2Fetc@12/g/t/12", ""},
		{"group scope needs no index", nil, ScopeGroup, "", "12", "default/%2E.%2F..%2Fetc@12/g/t/group", ""},
		{"key override drops the incarnation", alloc("1"), ScopeAlloc, "resnet/v2", "12", "default/resnet%2Fv2/g/t/1", ""},
		{"key override, group scope", nil, ScopeGroup, "shared", "12", "default/shared/g/t/group", ""},
		{"allocation-bound fallback", alloc("0"), ScopeAlloc, "", "alloc-0b1f", "default/%2E.%2F..%2Fetc@alloc-0b1f/g/t/0", ""},
		{"bad index", alloc("x"), ScopeAlloc, "", "12", "", "NOMAD_ALLOC_INDEX"},
		{"bad name", map[string]string{"NOMAD_ALLOC_NAME": "job.grp"}, ScopeAlloc, "", "12", "", "NOMAD_ALLOC_NAME"},
		{"no index at all", nil, ScopeAlloc, "", "12", "", "allocation index"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &drivers.TaskConfig{JobID: "../../etc", TaskGroupName: "g", Name: "t", Env: tc.env}
			k, err := checkpointKey(cfg, &CheckpointConfig{Scope: tc.scope, Key: tc.key}, tc.incarnation)
			if tc.wantErr != "" {
				must.ErrorContains(t, err, tc.wantErr)
				return
			}
			must.NoError(t, err)
			must.Eq(t, tc.want, k.String())
			back, err := store.ParseKey(k.String())
			must.NoError(t, err)
			must.Eq(t, k, back)
		})
	}
}

// newTaskAt is newTask for allocation index idx of group "g".
func newTaskAt(t *testing.T, td *testDriver, node string, idx int, tc *TaskConfig) *drivers.TaskConfig {
	t.Helper()
	cfg := newTask(t, td, node, tc)
	cfg.Env = map[string]string{"NOMAD_ALLOC_INDEX": strconv.Itoa(idx), "NOMAD_ALLOC_NAME": "train.g[" + strconv.Itoa(idx) + "]"}
	return cfg
}

// markerTask is a shell task that answers the checkpoint signal: "write"
// writes a state file and a marker at step; "skip" writes a skip marker.
// It prints what it restored at start.
func markerTask(ck *CheckpointConfig, mode string, step int) *TaskConfig {
	const script = `
seq=${CARAVAN_CHECKPOINT_SEQUENCE:-0}
d=$CARAVAN_CHECKPOINT_DIR
mark() { seq=$((seq+1)); printf '{"sequence":%d,%s}' "$seq" "$1" > "$d/.m"; mv "$d/.m" "$d/caravan-checkpoint.json"; }
if [ "$1" = skip ]; then
  trap 'mark "\"skip\":true"' USR1
else
  trap 'echo "state at $2" > "$d/state"; mark "\"step\":$2"' USR1
fi
echo "ready restored_step=${CARAVAN_CHECKPOINT_STEP:-none} generation=$CARAVAN_CHECKPOINT_GENERATION state=$(cat "$d/state" 2>/dev/null)"
while :; do sleep 0.05; done
`
	return &TaskConfig{Command: "/bin/sh", Args: []string{"-c", script, "sh", mode, strconv.Itoa(step)}, Checkpoint: ck}
}

// waitTaskEvent returns the first event of task taskID containing substr;
// other events are dropped.
func (td *testDriver) waitTaskEvent(t *testing.T, taskID, substr string) *drivers.TaskEvent {
	t.Helper()
	timeout := time.After(60 * time.Second)
	var seen []string
	for {
		select {
		case ev := <-td.events:
			seen = append(seen, ev.Message)
			if ev.TaskID == taskID && strings.Contains(ev.Message, substr) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no event of %s containing %q; saw %q", taskID, substr, seen)
			return nil
		}
	}
}

func groupCheckpoint() *CheckpointConfig {
	ck := defaultCheckpoint()
	ck.Scope = ScopeGroup
	return ck
}

var groupKey = store.Key{Namespace: "default", Job: "train", Group: "g", Task: "t", Shared: true, Incarnation: "1"}

// TestDriver_GroupScopeSharesOneState runs a writer (index 0) and a
// non-writer (index 1, skip markers) of one group: the non-writer's stop
// proceeds at once without a failure, the writer's state is the group's,
// and both indexes of the next run restore that one state.
func TestDriver_GroupScopeSharesOneState(t *testing.T) {
	storeDir := t.TempDir()
	td := newTestDriver(t, storeDir)
	writer := newTaskAt(t, td, "client1", 0, markerTask(groupCheckpoint(), "write", 120))
	reader := newTaskAt(t, td, "client2", 1, markerTask(groupCheckpoint(), "skip", 0))
	for _, cfg := range []*drivers.TaskConfig{writer, reader} {
		_, _, err := td.StartTask(cfg)
		must.NoError(t, err)
		waitStdout(t, cfg, "ready restored_step=none")
	}

	start := time.Now()
	must.NoError(t, td.StopTask(reader.ID, 20*time.Second, "SIGTERM"))
	must.Less(t, 10*time.Second, time.Since(start), must.Sprint("the stop waited for the checkpoint timeout"))
	ev := td.waitTaskEvent(t, reader.ID, "Checkpoint not needed (stop)")
	must.Eq(t, reasonStop, ev.Annotations[annotationReason])

	must.NoError(t, td.StopTask(writer.ID, 20*time.Second, "SIGTERM"))
	ev = td.waitTaskEvent(t, writer.ID, "Checkpoint saved (stop)")
	must.Eq(t, "120", ev.Annotations[annotationStep])
	for _, cfg := range []*drivers.TaskConfig{writer, reader} {
		must.NoError(t, td.DestroyTask(cfg.ID, true))
	}

	st := openStore(t, storeDir)
	keys, err := st.Keys()
	must.NoError(t, err)
	must.Eq(t, []store.Key{groupKey}, keys, must.Sprint("one group key, no per-index keys"))

	// Scale back to 2, indexes in the other order: both restore the state.
	for _, idx := range []int{1, 0} {
		cfg := newTaskAt(t, td, "client1", idx, markerTask(groupCheckpoint(), "skip", 0))
		_, _, err := td.StartTask(cfg)
		must.NoError(t, err)
		ev := td.waitTaskEvent(t, cfg.ID, "Checkpoint restored")
		must.Eq(t, "1", ev.Annotations[annotationGeneration])
		waitStdout(t, cfg, "ready restored_step=120 generation=1 state=state at 120")
		must.NoError(t, td.StopTask(cfg.ID, 20*time.Second, "SIGTERM"))
		td.waitTaskEvent(t, cfg.ID, "Checkpoint not needed (stop)")
		must.NoError(t, td.DestroyTask(cfg.ID, true))
	}
	m, err := st.Latest(groupKey)
	must.NoError(t, err)
	must.Eq(t, uint64(1), m.Generation, must.Sprint("skip markers committed nothing"))
}

// TestDriver_StaleGroupCommitIsSkipped: a group member that checkpoints an
// older step after another committed a newer one is refused by the store,
// with an event, and its stop still proceeds.
func TestDriver_StaleGroupCommitIsSkipped(t *testing.T) {
	storeDir := t.TempDir()
	td := newTestDriver(t, storeDir)
	ahead := newTaskAt(t, td, "client1", 0, markerTask(groupCheckpoint(), "write", 100))
	behind := newTaskAt(t, td, "client2", 1, markerTask(groupCheckpoint(), "write", 50))
	for _, cfg := range []*drivers.TaskConfig{ahead, behind} {
		_, _, err := td.StartTask(cfg)
		must.NoError(t, err)
		waitStdout(t, cfg, "ready")
	}
	must.NoError(t, td.SignalTask(ahead.ID, "SIGUSR1"))
	td.waitTaskEvent(t, ahead.ID, "Checkpoint saved (on demand)")

	must.NoError(t, td.SignalTask(behind.ID, "SIGUSR1"))
	ev := td.waitTaskEvent(t, behind.ID, "Stale checkpoint skipped (on demand)")
	must.Eq(t, "true", ev.Annotations[annotationStale])
	must.StrContains(t, ev.Message, "step 50, sequence 1 is older than generation 1 (step 100, sequence 1)")
	td.waitIdle(t, behind.ID)

	start := time.Now()
	must.NoError(t, td.StopTask(behind.ID, 20*time.Second, "SIGTERM"))
	must.Less(t, 10*time.Second, time.Since(start))
	td.waitTaskEvent(t, behind.ID, "Stale checkpoint skipped (stop)")
	must.NoError(t, td.StopTask(ahead.ID, 20*time.Second, "SIGTERM"))
	td.waitTaskEvent(t, ahead.ID, "Checkpoint saved (stop)")

	ms, err := openStore(t, storeDir).List(groupKey)
	must.NoError(t, err)
	must.Len(t, 2, ms)
	for _, m := range ms {
		must.Eq(t, "100", m.Meta["step"])
	}
}

// TestDriver_PurgedJobStartsFreshUnlessKeyed: a job purged and submitted
// again (a new create index) starts fresh; with checkpoint.key it resumes.
func TestDriver_PurgedJobStartsFreshUnlessKeyed(t *testing.T) {
	storeDir := t.TempDir()
	td := newTestDriver(t, storeDir)
	args := trainerArgs(1_000_000, "1ms")

	run := func(ck *CheckpointConfig, wantEvent string) *drivers.TaskConfig {
		t.Helper()
		cfg := newTask(t, td, "client1", trainerTask(ck, args...))
		_, _, err := td.StartTask(cfg)
		must.NoError(t, err)
		td.waitTaskEvent(t, cfg.ID, wantEvent)
		waitStdout(t, cfg, "step=")
		must.NoError(t, td.StopTask(cfg.ID, 20*time.Second, "SIGTERM"))
		td.waitTaskEvent(t, cfg.ID, "Checkpoint saved (stop)")
		must.NoError(t, td.DestroyTask(cfg.ID, true))
		return cfg
	}

	run(defaultCheckpoint(), "No checkpoint under default/train@1/g/t/0")
	run(defaultCheckpoint(), "Checkpoint restored") // same incarnation: resumes
	td.nomad.index.Store(2)                         // purged and submitted again
	cfg := run(defaultCheckpoint(), "No checkpoint under default/train@2/g/t/0")
	must.StrNotContains(t, stdout(t, cfg), "resumed")

	keyed := defaultCheckpoint()
	keyed.Key = "resnet"
	run(keyed, "No checkpoint under default/resnet/g/t/0")
	td.nomad.index.Store(3)
	cfg = run(keyed, "Checkpoint restored")
	must.StrContains(t, stdout(t, cfg), "resumed step=")

	keys, err := openStore(t, storeDir).Keys()
	must.NoError(t, err)
	var got []string
	for _, k := range keys {
		got = append(got, k.String())
	}
	must.Eq(t, []string{"default/resnet/g/t/0", "default/train@1/g/t/0", "default/train@2/g/t/0"}, got)
}

// TestDriver_IncarnationUnknown: without the Nomad API a task fails to
// start, or with on_restore_error = "start_fresh" starts fresh with its
// checkpoints bound to its allocation; both say so in an event.
func TestDriver_IncarnationUnknown(t *testing.T) {
	cases := []struct {
		name   string
		policy string
		token  string // the fake's required token; the plugin sends "s3cret"
		down   bool
		want   string
	}{
		{"API down, fail", OnRestoreErrorFail, "", true, "job incarnation unknown"},
		{"API down, start fresh", OnRestoreErrorStartFresh, "", true, "@alloc-"},
		{"token refused, fail", OnRestoreErrorFail, "other", false, "Permission denied"},
		{"token accepted", OnRestoreErrorFail, "s3cret", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			storeDir := t.TempDir()
			fake := newFakeNomad(t)
			fake.down.Store(tc.down)
			fake.token = tc.token
			tokenFile := filepath.Join(t.TempDir(), "token")
			must.NoError(t, os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600))
			td := newTestDriverWith(t, &Config{CheckpointStore: storeDir, NomadAddress: fake.URL, NomadTokenFile: tokenFile})
			ck := defaultCheckpoint()
			ck.OnRestoreError = tc.policy
			cfg := newTask(t, td, "client1", markerTask(ck, "write", 7))
			_, _, err := td.d.StartTask(cfg)
			if tc.want == "" {
				must.NoError(t, err)
				td.waitTaskEvent(t, cfg.ID, "No checkpoint under "+testKey.String())
				return
			}
			if tc.policy == OnRestoreErrorFail {
				must.ErrorIs(t, err, errNoIncarnation)
				must.StrContains(t, err.Error(), tc.want)
				must.StrContains(t, err.Error(), "checkpoint.key")
				td.waitTaskEvent(t, cfg.ID, "Checkpoint identity unknown, not starting")
				return
			}
			must.NoError(t, err)
			ev := td.waitTaskEvent(t, cfg.ID, "Checkpoint identity unknown")
			must.StrContains(t, ev.Message, tc.want+cfg.AllocID)
			waitStdout(t, cfg, "ready")
			must.NoError(t, td.StopTask(cfg.ID, 20*time.Second, "SIGTERM"))
			td.waitTaskEvent(t, cfg.ID, "Checkpoint saved (stop)")
			k := testKey
			k.Incarnation = allocIncarnationPrefix + cfg.AllocID
			_, err = openStore(t, storeDir).Latest(k)
			must.NoError(t, err)
		})
	}
}
