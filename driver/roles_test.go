package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
	"github.com/hashicorp/nomad/helper/uuid"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/protocol"
)

func roleTask(role string) *TaskConfig {
	return &TaskConfig{Checkpoint: &CheckpointConfig{Signal: "SIGTERM", Timeout: "5m",
		OnRestoreError: OnRestoreErrorFail, Role: role, Task: "trainer", Dir: "checkpoint"}}
}

// TestTaskConfigSchema_ParsesRole decodes a role task's config block as
// Nomad does: no command, the role fields set.
func TestTaskConfigSchema_ParsesRole(t *testing.T) {
	var got TaskConfig
	hclutils.NewConfigParser(taskConfigSpec).ParseHCL(t, `config {
  checkpoint {
    role         = "restore"
    task         = "trainer"
    dir          = "checkpoint"
    wait_timeout = "2m"
  }
}`, &got)
	must.Eq(t, "", got.Command)
	must.Eq(t, RoleRestore, got.Checkpoint.Role)
	must.Eq(t, "trainer", got.Checkpoint.Task)
	must.Eq(t, "checkpoint", got.Checkpoint.Dir)
	must.NoError(t, got.validate())
}

// TestCheckpointRole_ValidateNamesFields: every bad role config is refused
// with errors naming each field.
func TestCheckpointRole_ValidateNamesFields(t *testing.T) {
	cases := []struct {
		name string
		edit func(*TaskConfig)
		want []string
	}{
		{"restore ok", func(*TaskConfig) {}, nil},
		{"commit ok", func(tc *TaskConfig) { tc.Checkpoint.Role = RoleCommit }, nil},
		{"sidecar ok", func(tc *TaskConfig) { tc.Checkpoint.Role, tc.Checkpoint.Interval = RoleSidecar, "10m" }, nil},
		{"unknown role", func(tc *TaskConfig) { tc.Checkpoint.Role = "backup" }, []string{"checkpoint.role:"}},
		{"role typo", func(tc *TaskConfig) { tc.Checkpoint.Role = "sidcar" },
			[]string{`checkpoint.role: "sidcar" must be "restore", "sidecar" or "commit"`}},
		{"sidecar waits", func(tc *TaskConfig) { tc.Checkpoint.Role, tc.Checkpoint.WaitTimeout = RoleSidecar, "1m" },
			[]string{"checkpoint.wait_timeout:"}},
		{"command with a role", func(tc *TaskConfig) { tc.Command = "/bin/true" }, []string{"command:"}},
		{"no task, no dir", func(tc *TaskConfig) { tc.Checkpoint.Task, tc.Checkpoint.Dir = "", "" },
			[]string{"checkpoint.task:", "checkpoint.dir:"}},
		{"absolute dir", func(tc *TaskConfig) { tc.Checkpoint.Dir = "/alloc/checkpoint" }, []string{"checkpoint.dir:"}},
		{"escaping dir", func(tc *TaskConfig) { tc.Checkpoint.Dir = "../data" }, []string{"checkpoint.dir:"}},
		{"unclean dir", func(tc *TaskConfig) { tc.Checkpoint.Dir = "a//b/" }, []string{"checkpoint.dir:"}},
		{"interval", func(tc *TaskConfig) { tc.Checkpoint.Interval = "1m" }, []string{"checkpoint.interval:"}},
		{"commit waits", func(tc *TaskConfig) { tc.Checkpoint.Role, tc.Checkpoint.WaitTimeout = RoleCommit, "1m" },
			[]string{"checkpoint.wait_timeout:"}},
		{"bad wait", func(tc *TaskConfig) { tc.Checkpoint.WaitTimeout = "soon" }, []string{"checkpoint.wait_timeout:"}},
		{"role fields without a role", func(tc *TaskConfig) { tc.Command, tc.Checkpoint.Role = "/bin/true", "" },
			[]string{"checkpoint.task:", "checkpoint.dir:"}},
		{"replica ok", func(tc *TaskConfig) { tc.Checkpoint.Scope = ScopeReplica }, nil},
		{"replica without a role", func(tc *TaskConfig) {
			tc.Command, tc.Checkpoint.Role, tc.Checkpoint.Task, tc.Checkpoint.Dir, tc.Checkpoint.Scope = "/bin/true", "", "", "", ScopeReplica
		}, []string{`checkpoint.scope: "replica" is for checkpoint.role tasks`}},
		{"no command without a role", func(tc *TaskConfig) { tc.Checkpoint.Role, tc.Checkpoint.Task, tc.Checkpoint.Dir = "", "", "" },
			[]string{"command:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tc := roleTask(RoleRestore)
			c.edit(tc)
			err := tc.validate()
			if c.want == nil {
				must.NoError(t, err)
				return
			}
			must.Error(t, err)
			for _, w := range c.want {
				must.StrContains(t, err.Error(), w)
			}
		})
	}
}

// TestCheckRole: a role its task's lifecycle cannot honour is refused,
// naming the field.
func TestCheckRole(t *testing.T) {
	jobWith := func(driver string, restore, commit *api.TaskLifecycle, trainer *api.TaskLifecycle) *api.Job {
		g := "train"
		return &api.Job{TaskGroups: []*api.TaskGroup{{Name: &g, Tasks: []*api.Task{
			{Name: "trainer", Driver: driver, Lifecycle: trainer},
			{Name: "restore", Driver: PluginName, Lifecycle: restore},
			{Name: "commit", Driver: PluginName, Lifecycle: commit},
		}}}}
	}
	job := func(restore, commit *api.TaskLifecycle, trainer *api.TaskLifecycle) *api.Job {
		return jobWith("docker", restore, commit, trainer)
	}
	poststartSide := &api.TaskLifecycle{Hook: api.TaskLifecycleHookPoststart, Sidecar: true}
	poststart := &api.TaskLifecycle{Hook: api.TaskLifecycleHookPoststart}
	pre := &api.TaskLifecycle{Hook: api.TaskLifecycleHookPrestart}
	side := &api.TaskLifecycle{Hook: api.TaskLifecycleHookPrestart, Sidecar: true}
	post := &api.TaskLifecycle{Hook: api.TaskLifecycleHookPoststop}
	cases := []struct {
		name, task, role, target string
		job                      *api.Job
		want                     string
	}{
		{"restore prestart", "restore", RoleRestore, "trainer", job(pre, post, nil), ""},
		{"commit poststop", "commit", RoleCommit, "trainer", job(pre, post, nil), ""},
		{"restore as poststop", "commit", RoleRestore, "trainer", job(pre, post, nil), "checkpoint.role:"},
		{"commit as prestart", "restore", RoleCommit, "trainer", job(pre, post, nil), "checkpoint.role:"},
		{"restore as sidecar", "restore", RoleRestore, "trainer", job(side, post, nil), "checkpoint.role:"},
		{"restore as main task", "restore", RoleRestore, "trainer", job(nil, post, nil), "checkpoint.role:"},
		{"missing target", "restore", RoleRestore, "train", job(pre, post, nil), "checkpoint.task:"},
		{"target is itself", "restore", RoleRestore, "restore", job(pre, post, nil), "checkpoint.task:"},
		{"target is a lifecycle task", "restore", RoleRestore, "commit", job(pre, post, nil), "checkpoint.task:"},
		{"sidecar poststart sidecar", "restore", RoleSidecar, "trainer", job(poststartSide, post, nil), ""},
		{"sidecar not a sidecar", "restore", RoleSidecar, "trainer", job(poststart, post, nil), "checkpoint.role:"},
		{"sidecar as prestart", "restore", RoleSidecar, "trainer", job(side, post, nil), "checkpoint.role:"},
		{"podman target", "restore", RoleRestore, "trainer", jobWith("podman", pre, post, nil), ""},
		{"unknown driver let through", "restore", RoleRestore, "trainer", jobWith("nspawn", pre, post, nil), ""},
		{"driver without the alloc dir", "restore", RoleRestore, "trainer", jobWith("qemu", pre, post, nil),
			`checkpoint.task: task "trainer" runs under driver "qemu", which does not mount the allocation directory`},
		{"missing target and wrong hook, both", "commit", RoleRestore, "train", job(pre, post, nil),
			`checkpoint.task: no task "train" in group "train"; checkpoint.role: "restore" needs lifecycle`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkRole(c.job, "train", c.task, &CheckpointConfig{Role: c.role, Task: c.target})
			if c.want == "" {
				must.NoError(t, err)
				return
			}
			must.ErrorContains(t, err, c.want)
		})
	}
}

// TestBusyPredecessors: a restore waits only for other running
// allocations of its own slot (or group, with scope "group").
func TestBusyPredecessors(t *testing.T) {
	cfg := &drivers.TaskConfig{AllocID: "new", TaskGroupName: "g", Env: map[string]string{"NOMAD_ALLOC_NAME": "train.g[0]"}}
	stubs := []*api.AllocationListStub{
		{ID: "new", Name: "train.g[0]", TaskGroup: "g", ClientStatus: "pending"},
		{ID: "old-running", Name: "train.g[0]", TaskGroup: "g", ClientStatus: "running"},
		{ID: "old-done", Name: "train.g[0]", TaskGroup: "g", ClientStatus: "complete"},
		{ID: "old-lost", Name: "train.g[0]", TaskGroup: "g", ClientStatus: "lost"},
		{ID: "sibling", Name: "train.g[1]", TaskGroup: "g", ClientStatus: "running"},
		{ID: "other-group", Name: "train.h[0]", TaskGroup: "h", ClientStatus: "running"},
	}
	must.Eq(t, []string{"old-running"}, busyPredecessors(stubs, cfg, ScopeAlloc))
	must.Eq(t, []string{"old-running", "sibling"}, busyPredecessors(stubs, cfg, ScopeGroup))
}

// sameAllocTask is another task of cfg's allocation, with driver config tc.
func sameAllocTask(t *testing.T, cfg *drivers.TaskConfig, name string, tc *TaskConfig) *drivers.TaskConfig {
	t.Helper()
	c := *cfg
	c.ID, c.Name = uuid.Generate(), name
	must.NoError(t, c.EncodeConcreteDriverConfig(tc))
	return &c
}

// TestDriver_RoleRestoreCommit: a prestart restore task prepares the
// allocation's shared checkpoint directory, a poststop commit task commits
// what the main task (any driver) left there, once, and the next
// allocation's restore task finds it.
func TestDriver_RoleRestoreCommit(t *testing.T) {
	td := newTestDriver(t, t.TempDir())

	restore1 := newTask(t, td, "client1", roleTask(RoleRestore))
	_, _, err := td.StartTask(restore1)
	must.NoError(t, err)
	td.waitEvent(t, "No checkpoint under default/train@1/g/trainer/0")
	must.Eq(t, 0, td.waitExit(t, restore1.ID).ExitCode)
	_, err = td.d.TaskStats(t.Context(), restore1.ID, 0)
	must.ErrorIs(t, err, errRoleExited)

	// The main task (a container in real life) saves into /alloc/checkpoint.
	dir := filepath.Join(restore1.TaskDir().SharedAllocDir, "checkpoint")
	must.NoError(t, os.WriteFile(filepath.Join(dir, "state.bin"), []byte("weights"), 0o644))
	step := uint64(7)
	must.NoError(t, protocol.WriteMarker(dir, &protocol.Marker{Sequence: 1, Step: &step}))

	commit := sameAllocTask(t, restore1, "commit", roleTask(RoleCommit))
	_, _, err = td.StartTask(commit)
	must.NoError(t, err)
	ev := td.waitEvent(t, "Checkpoint saved (exit): generation 1 at step 7")
	must.Eq(t, "1", ev.Annotations[annotationGeneration])
	must.Eq(t, 0, td.waitExit(t, commit.ID).ExitCode)
	must.NoError(t, td.StopTask(commit.ID, 0, "SIGTERM"))
	must.NoError(t, td.DestroyTask(commit.ID, false))

	// The same marker again is not a new checkpoint.
	again := sameAllocTask(t, restore1, "commit", roleTask(RoleCommit))
	_, _, err = td.StartTask(again)
	must.NoError(t, err)
	td.waitEvent(t, "No new checkpoint of task \"trainer\" to commit (generation 1 stays the newest)")

	restore2 := newTask(t, td, "client2", roleTask(RoleRestore))
	_, _, err = td.StartTask(restore2)
	must.NoError(t, err)
	td.waitEvent(t, "Checkpoint restored: generation 1 (step 7) from client1")
	b, err := os.ReadFile(filepath.Join(restore2.TaskDir().SharedAllocDir, "checkpoint", "state.bin"))
	must.NoError(t, err)
	must.Eq(t, "weights", string(b))
}

// TestDriver_RoleRestoreWaitsForRunningPredecessor: while Nomad reports
// another allocation of the slot running (its poststop commit may still
// be writing), the restore does not start from an older generation: it
// waits, and fails at checkpoint.wait_timeout naming the allocation.
func TestDriver_RoleRestoreWaitsForRunningPredecessor(t *testing.T) {
	td := newTestDriver(t, t.TempDir())
	td.nomad.allocs.Store(&[]map[string]any{
		{"ID": "old-alloc", "Name": "train.g[0]", "TaskGroup": "g", "ClientStatus": "running"},
	})
	tc := roleTask(RoleRestore)
	tc.Checkpoint.WaitTimeout = "300ms"
	cfg := newTask(t, td, "client1", tc)
	_, _, err := td.StartTask(cfg)
	must.ErrorContains(t, err, "checkpoint.wait_timeout")
	must.ErrorContains(t, err, "old-alloc")
	td.waitEvent(t, "Waiting for allocation old-alloc to finish")

	// Once it is complete, the restore goes ahead.
	td.nomad.allocs.Store(&[]map[string]any{
		{"ID": "old-alloc", "Name": "train.g[0]", "TaskGroup": "g", "ClientStatus": "complete"},
	})
	cfg2 := newTask(t, td, "client1", tc)
	_, _, err = td.StartTask(cfg2)
	must.NoError(t, err)
}

// TestDriver_RoleWithoutStore: a role task on a client without a
// checkpoint store fails with an error naming the plugin setting.
func TestDriver_RoleWithoutStore(t *testing.T) {
	td := newTestDriver(t, "")
	_, _, err := td.StartTask(newTask(t, td, "client1", roleTask(RoleCommit)))
	must.Error(t, err)
	must.True(t, strings.Contains(err.Error(), "checkpoint_store"), must.Sprint(err))
}
