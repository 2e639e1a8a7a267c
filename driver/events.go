package driver

import (
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/nomad/drivers/shared/eventer"
	"github.com/hashicorp/nomad/plugins/drivers"
)

// Task events are coarse (Nomad keeps the last 10 per task): one per
// checkpoint saved, failed, restored or fallen back, and one per exit after
// the GPU ran out of memory.
const (
	annotationGeneration = "generation"
	annotationBytes      = "bytes"
	annotationNewBytes   = "new_bytes"
	annotationDuration   = "duration"
	annotationStep       = "step"
	annotationNode       = "node"
	annotationAge        = "age"
	annotationReason     = "reason"
	// annotationStale marks a commit the store refused as older than its
	// newest generation.
	annotationStale = "stale"
	// annotationTaskDuration is the time from the checkpoint signal to the
	// task's marker (the task's own share of a checkpoint).
	annotationTaskDuration = "task_duration"
	// annotationExitCode is the exit code of a task that ran out of GPU
	// memory (gpuoom.go).
	annotationExitCode = "exit_code"
)

// taskEmitter emits events for one task; with out set it also writes each
// event's message, timestamped, there (a role task's stdout log).
type taskEmitter struct {
	eventer *eventer.Eventer
	taskID  string
	name    string
	allocID string
	out     io.Writer
}

func newTaskEmitter(e *eventer.Eventer, cfg *drivers.TaskConfig) *taskEmitter {
	return &taskEmitter{eventer: e, taskID: cfg.ID, name: cfg.Name, allocID: cfg.AllocID}
}

func (e *taskEmitter) emit(annotations map[string]string, format string, args ...any) {
	if e == nil {
		return
	}
	now, msg := time.Now(), fmt.Sprintf(format, args...)
	if e.out != nil {
		_, _ = fmt.Fprintf(e.out, "%s %s\n", now.UTC().Format(time.RFC3339Nano), msg)
	}
	if e.eventer == nil {
		return
	}
	_ = e.eventer.EmitEvent(&drivers.TaskEvent{
		TaskID:      e.taskID,
		TaskName:    e.name,
		AllocID:     e.allocID,
		Timestamp:   now,
		Message:     msg,
		Annotations: annotations,
	})
}
