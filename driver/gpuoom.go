package driver

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A task that exits non-zero after its GPU ran out of memory says so on
// stderr in words the CUDA stack fixes; the driver looks for them in the
// tail of the task's stderr log and emits a "GPU out of memory" event with
// the annotation gpu_out_of_memory = "true" (Nomad keeps annotations as the
// event's details, where the planner reads them).
const annotationGPUOutOfMemory = "gpu_out_of_memory"

// gpuOOMMarkers are what the CUDA stack writes when GPU memory runs out:
// torch's exception class (torch.OutOfMemoryError since torch 2.5), its
// message, the CUDA runtime's and driver API's error names.
var gpuOOMMarkers = []string{
	"torch.cuda.OutOfMemoryError",
	"torch.OutOfMemoryError",
	"CUDA out of memory",
	"cudaErrorMemoryAllocation",
	"CUDA_ERROR_OUT_OF_MEMORY",
}

const (
	// oomTailBytes is how much of the end of the stderr log is read.
	oomTailBytes = 64 << 10
	// oomLogWait bounds how long the driver waits for Nomad's log
	// collector to copy the last of the task's stderr into the log file;
	// it stops as soon as a marker is found or the file stops growing for
	// oomLogGap.
	oomLogWait = 500 * time.Millisecond
	oomLogGap  = 50 * time.Millisecond
	// oomLineMax bounds the stderr line quoted in the event.
	oomLineMax = 200
)

// noteGPUOutOfMemory emits the "GPU out of memory" event when a task that
// exited with a non-zero code left a GPU out-of-memory message in its
// stderr log. Nothing is emitted for a signal or a clean exit.
func (h *taskHandle) noteGPUOutOfMemory(code, signal int) {
	if h.events == nil || code == 0 || signal != 0 || h.taskConfig == nil {
		return
	}
	line, ok := waitGPUOOMLine(h.taskConfig.TaskDir().LogDir, h.taskConfig.Name)
	if !ok {
		h.logger.Debug("no GPU out-of-memory error in the stderr log's tail", "exit_code", code)
		return
	}
	h.logger.Warn("task ran out of GPU memory", "exit_code", code, "stderr", line)
	h.events.emit(map[string]string{annotationGPUOutOfMemory: "true", annotationExitCode: strconv.Itoa(code)},
		"GPU out of memory: the task exited with code %d; its stderr says: %s", code, line)
}

// waitGPUOOMLine reads the tail of task's newest stderr log in logDir until
// it holds a GPU out-of-memory marker, or has content and stops growing
// for oomLogGap, or oomLogWait has passed (the log collector may not have
// created or written the file yet), and returns the line with the last
// marker.
func waitGPUOOMLine(logDir, task string) (string, bool) {
	deadline := time.Now().Add(oomLogWait)
	lastSize := int64(-1)
	for {
		tail, size := stderrTail(logDir, task)
		if line, ok := gpuOOMLine(tail); ok {
			return line, true
		}
		if (size > 0 && size == lastSize) || time.Now().After(deadline) {
			return "", false
		}
		lastSize = size
		oomLogPause(oomLogGap) // bounded poll of a file another process writes
	}
}

// oomLogPause waits between two reads of the stderr log (tests replace it).
var oomLogPause = time.Sleep

// stderrTail returns the last oomTailBytes of task's newest stderr log
// (Nomad's log collector writes <task>.stderr.<n>, n growing as it
// rotates) and that file's size; nil and -1 when there is none.
func stderrTail(logDir, task string) ([]byte, int64) {
	paths, _ := filepath.Glob(filepath.Join(logDir, task+".stderr.*"))
	newest, idx := "", -1
	for _, p := range paths {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), task+".stderr."))
		if err == nil && n > idx {
			newest, idx = p, n
		}
	}
	if newest == "" {
		return nil, -1
	}
	f, err := os.Open(newest)
	if err != nil {
		return nil, -1
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, -1
	}
	off := max(0, st.Size()-oomTailBytes)
	b, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return nil, -1
	}
	return b, st.Size()
}

// gpuOOMLine returns the last line of tail that holds a marker, trimmed
// and shortened to oomLineMax bytes.
func gpuOOMLine(tail []byte) (string, bool) {
	lines := bytes.Split(tail, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		l := string(bytes.TrimSpace(lines[i]))
		for _, m := range gpuOOMMarkers {
			if strings.Contains(l, m) {
				if len(l) > oomLineMax {
					l = l[:oomLineMax] + "..."
				}
				return strings.ToValidUTF8(l, "?"), true
			}
		}
	}
	return "", false
}
