package driver

import (
	"sync"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
	pstructs "github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/caravan-nomad/caravan/driver/store"
)

// taskHandleVersion is the version of TaskState this driver writes with
// SetDriverState; RecoverTask refuses handles of other versions.
const taskHandleVersion = 1

// TaskState is the state encoded in the handle returned by StartTask, all
// RecoverTask needs to reattach after a plugin or client restart. The task's
// decoded config is kept here because a handle restored from the client's
// state database no longer carries the raw driver config.
type TaskState struct {
	ReattachConfig *pstructs.ReattachConfig
	TaskConfig     *drivers.TaskConfig
	DriverConfig   *TaskConfig
	Pid            int
	StartedAt      time.Time
	// Checkpoint is nil for tasks without a checkpoint block.
	Checkpoint *CheckpointState
}

// CheckpointState is what a recovered handle needs to keep checkpointing.
type CheckpointState struct {
	Dir                string
	Key                store.Key
	RestoredGeneration uint64
	RestoredSequence   uint64
}

// taskStore is the in-memory map of task IDs to handles.
type taskStore struct {
	store map[string]*taskHandle
	lock  sync.RWMutex
}

func newTaskStore() *taskStore {
	return &taskStore{store: map[string]*taskHandle{}}
}

func (ts *taskStore) Set(id string, handle *taskHandle) {
	ts.lock.Lock()
	defer ts.lock.Unlock()
	ts.store[id] = handle
}

func (ts *taskStore) Get(id string) (*taskHandle, bool) {
	ts.lock.RLock()
	defer ts.lock.RUnlock()
	t, ok := ts.store[id]
	return t, ok
}

func (ts *taskStore) Delete(id string) {
	ts.lock.Lock()
	defer ts.lock.Unlock()
	delete(ts.store, id)
}
