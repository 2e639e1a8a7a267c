package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/protocol"
)

func replicaRole(role string) *TaskConfig {
	tc := roleTask(role)
	tc.Checkpoint.Scope = ScopeReplica
	return tc
}

// onIndex makes cfg the task of allocation index i.
func onIndex(cfg *drivers.TaskConfig, i int) *drivers.TaskConfig {
	cfg.Env["NOMAD_ALLOC_INDEX"] = fmt.Sprint(i)
	cfg.Env["NOMAD_ALLOC_NAME"] = fmt.Sprintf("train.g[%d]", i)
	return cfg
}

// saveAndCommit writes state and a marker into cfg's shared checkpoint
// directory, as a container's launcher does on its kill signal, and runs
// the poststop commit task, which must commit it as generation gen.
func saveAndCommit(t *testing.T, td *testDriver, cfg *drivers.TaskConfig, state string, seq, step, gen uint64) {
	t.Helper()
	dir := filepath.Join(cfg.TaskDir().SharedAllocDir, "checkpoint")
	must.NoError(t, os.MkdirAll(dir, 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(dir, "state.bin"), []byte(state), 0o644))
	must.NoError(t, protocol.WriteMarker(dir, &protocol.Marker{Sequence: seq, Step: &step}))
	commit := sameAllocTask(t, cfg, "commit", replicaRole(RoleCommit))
	_, _, err := td.StartTask(commit)
	must.NoError(t, err)
	td.waitEvent(t, fmt.Sprintf("Checkpoint saved (exit): generation %d at step %d", gen, step))
	must.Eq(t, 0, td.waitExit(t, commit.ID).ExitCode)
}

// TestDriver_RoleRestoreReplicaTakesTheNewestIndex: with scope "replica" a
// worker resumed into index 0 restores index 1's newer checkpoint (step
// 500), not its own index's older one (step 100), and its marker's sequence
// is raised above index 0's newest, so the next commit to index 0's key is
// new. Scope "alloc" restores the index's own checkpoint, as before.
func TestDriver_RoleRestoreReplicaTakesTheNewestIndex(t *testing.T) {
	td := newTestDriver(t, t.TempDir())
	saveAndCommit(t, td, onIndex(newTask(t, td, "client2", replicaRole(RoleRestore)), 1), "step 500", 2, 500, 1)
	saveAndCommit(t, td, newTask(t, td, "client1", replicaRole(RoleRestore)), "step 100", 5, 100, 1)

	own := newTask(t, td, "client1", roleTask(RoleRestore))
	_, _, err := td.StartTask(own)
	must.NoError(t, err)
	td.waitEvent(t, "Checkpoint restored: generation 1 (step 100) from client1")

	resumed := newTask(t, td, "client3", replicaRole(RoleRestore))
	_, _, err = td.StartTask(resumed)
	must.NoError(t, err)
	td.waitEvent(t, "Checkpoint restored: generation 1 (step 500) of allocation index 1 from client2")
	dir := filepath.Join(resumed.TaskDir().SharedAllocDir, "checkpoint")
	b, err := os.ReadFile(filepath.Join(dir, "state.bin"))
	must.NoError(t, err)
	must.Eq(t, "step 500", string(b))
	m, err := protocol.ReadMarker(dir)
	must.NoError(t, err)
	must.Eq(t, uint64(5), m.Sequence, must.Sprint("raised to index 0's newest sequence"))

	// The resumed worker's next checkpoint is index 0's newest.
	saveAndCommit(t, td, resumed, "step 600", m.Sequence+1, 600, 2)
}

// TestBusyPredecessors_Replica: a scope "replica" restore waits for its
// slot's running predecessor and for every allocation of the group Nomad
// is stopping (its commit may be the newest), not for running workers.
func TestBusyPredecessors_Replica(t *testing.T) {
	cfg := &drivers.TaskConfig{AllocID: "new", TaskGroupName: "g", Env: map[string]string{"NOMAD_ALLOC_NAME": "train.g[0]"}}
	stubs := []*api.AllocationListStub{
		{ID: "old-running", Name: "train.g[0]", TaskGroup: "g", ClientStatus: "running", DesiredStatus: "run"},
		{ID: "worker", Name: "train.g[1]", TaskGroup: "g", ClientStatus: "running", DesiredStatus: "run"},
		{ID: "stopping", Name: "train.g[2]", TaskGroup: "g", ClientStatus: "running", DesiredStatus: "stop"},
		{ID: "stopped", Name: "train.g[3]", TaskGroup: "g", ClientStatus: "complete", DesiredStatus: "stop"},
		{ID: "other-group", Name: "train.h[0]", TaskGroup: "h", ClientStatus: "running", DesiredStatus: "stop"},
	}
	must.Eq(t, []string{"old-running", "stopping"}, busyPredecessors(stubs, cfg, ScopeReplica))
	must.Eq(t, []string{"old-running"}, busyPredecessors(stubs, cfg, ScopeAlloc))
}
