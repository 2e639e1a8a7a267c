package driver

import (
	"context"
	"strconv"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/nomad/drivers/shared/executor"
	"github.com/hashicorp/nomad/plugins/drivers"
)

// taskHandle is one running task: its executor, and its checkpointer when
// the task uses the checkpoint protocol.
type taskHandle struct {
	exec         executor.Executor
	pid          int
	pluginClient *plugin.Client
	logger       hclog.Logger
	ckpt         *checkpointer // nil: runs like raw_exec
	side         *sidecar      // a checkpoint.role = "sidecar" task (no process)
	events       *taskEmitter  // nil: no events (the GPU out-of-memory event)

	// stateLock syncs access to all fields below
	stateLock sync.RWMutex

	taskConfig  *drivers.TaskConfig
	procState   drivers.TaskState
	startedAt   time.Time
	completedAt time.Time
	exitResult  *drivers.ExitResult
	doneCh      chan struct{}
}

func (h *taskHandle) TaskStatus() *drivers.TaskStatus {
	h.stateLock.RLock()
	defer h.stateLock.RUnlock()

	attrs := map[string]string{"pid": strconv.Itoa(h.pid)}
	if h.ckpt != nil {
		attrs["checkpoint_dir"] = h.ckpt.dir
		attrs["checkpoint_key"] = h.ckpt.key.String()
		attrs["checkpoint_sequence"] = strconv.FormatUint(h.ckpt.lastSeq.Load(), 10)
	}
	return &drivers.TaskStatus{
		ID:               h.taskConfig.ID,
		Name:             h.taskConfig.Name,
		State:            h.procState,
		StartedAt:        h.startedAt,
		CompletedAt:      h.completedAt,
		ExitResult:       h.exitResult,
		DriverAttributes: attrs,
	}
}

func (h *taskHandle) IsRunning() bool {
	h.stateLock.RLock()
	defer h.stateLock.RUnlock()
	return h.procState == drivers.TaskStateRunning
}

// run waits for the process and records how it ended; doneCh closes then,
// after the GPU out-of-memory event of a task that ran out (so that it
// comes before Nomad's "Terminated").
func (h *taskHandle) run() {
	defer close(h.doneCh)
	h.stateLock.Lock()
	if h.exitResult == nil {
		h.exitResult = &drivers.ExitResult{}
	}
	h.stateLock.Unlock()

	ps, err := h.exec.Wait(context.Background())
	if err == nil {
		h.noteGPUOutOfMemory(ps.ExitCode, ps.Signal)
	}

	h.stateLock.Lock()
	defer h.stateLock.Unlock()

	if err != nil {
		h.exitResult.Err = err
		h.procState = drivers.TaskStateUnknown
		h.completedAt = time.Now()
		return
	}
	h.procState = drivers.TaskStateExited
	h.exitResult.ExitCode = ps.ExitCode
	h.exitResult.Signal = ps.Signal
	h.completedAt = ps.Time
}
