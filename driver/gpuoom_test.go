package driver

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// A task that exits non-zero after printing a GPU out-of-memory error gets
// a "GPU out of memory" event (annotated for the planner); other failures
// and clean exits get none. Each task is a shell that writes its stderr
// and exits; a last OOM task's event marks the end of the events of the
// tasks before it (the eventer keeps their order).
func TestDriver_GPUOutOfMemoryExitIsAnEvent(t *testing.T) {
	td := newTestDriver(t, "")
	torch := "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB"
	cases := []struct {
		name, stderr string
		code         int
		want         string // the event's message; "" for none
	}{
		{"torch OutOfMemoryError, exit 1", torch, 1,
			"GPU out of memory: the task exited with code 1; its stderr says: " + torch},
		{"CUDA runtime error name", "RuntimeError: CUDA error: cudaErrorMemoryAllocation", 3,
			"GPU out of memory: the task exited with code 3; its stderr says: RuntimeError: CUDA error: cudaErrorMemoryAllocation"},
		{"another error, exit 1", "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x3 and 5x6)", 1, ""},
		{"OOM text, clean exit", torch, 0, ""},
	}
	ids := make([]string, len(cases))
	for i, tc := range cases {
		cfg := newTask(t, td, "client1", &TaskConfig{
			Command: "sh",
			Args: []string{"-c", `echo "Traceback (most recent call last):" >&2; echo "$1" >&2; exit "$2"`,
				"sh", tc.stderr, strconv.Itoa(tc.code)},
		})
		_, _, err := td.StartTask(cfg)
		must.NoError(t, err)
		must.Eq(t, tc.code, td.waitExit(t, cfg.ID).ExitCode, must.Sprint(tc.name))
		ids[i] = cfg.ID
	}
	last := newTask(t, td, "client1", &TaskConfig{Command: "sh", Args: []string{"-c", `echo "` + torch + `" >&2; exit 1`}})
	_, _, err := td.StartTask(last)
	must.NoError(t, err)

	got := map[string]string{} // task ID -> its GPU out-of-memory event
	for {
		ev := td.waitEvent(t, "GPU out of memory")
		must.Eq(t, "true", ev.Annotations[annotationGPUOutOfMemory])
		if ev.TaskID == last.ID {
			break
		}
		must.MapNotContainsKey(t, got, ev.TaskID, must.Sprint("two events for one exit"))
		got[ev.TaskID] = ev.Message
		must.Eq(t, ev.Message[len("GPU out of memory: the task exited with code "):][:1], ev.Annotations[annotationExitCode])
	}
	for i, tc := range cases {
		must.Eq(t, tc.want, got[ids[i]], must.Sprint(tc.name))
	}
}

func TestGPUOOMLine(t *testing.T) {
	long := "torch.OutOfMemoryError: " + string(make([]byte, 300))
	for _, tc := range []struct {
		name, tail string
		want       string
		ok         bool
	}{
		{"torch 2.5 alias", "x\ntorch.OutOfMemoryError: CUDA out of memory.\n", "torch.OutOfMemoryError: CUDA out of memory.", true},
		{"driver API", "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n",
			"jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: CUDA_ERROR_OUT_OF_MEMORY: out of memory", true},
		{"last matching line", "CUDA out of memory (first)\nother\nCUDA out of memory (last)\nbye\n", "CUDA out of memory (last)", true},
		{"host OOM is not GPU OOM", "MemoryError: Unable to allocate 8.00 GiB\nKilled\n", "", false},
		{"long line shortened", long, long[:oomLineMax] + "...", true},
		{"empty", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := gpuOOMLine([]byte(tc.tail))
			must.Eq(t, tc.ok, ok)
			must.Eq(t, tc.want, got)
		})
	}
}

// Nomad's log collector may create or write the stderr log after the task
// has exited: the driver reads it again until it has content that stops
// growing. Each case's log changes at the first pause between two reads
// (a cluster run read an empty log once and gave up before this).
func TestWaitGPUOOMLine_LogWrittenLate(t *testing.T) {
	const oom = "torch.cuda.OutOfMemoryError: CUDA out of memory."
	for _, tc := range []struct {
		name          string
		before, after string // the log's content before the first pause and after it; "-" for no file
		want          bool
	}{
		{"no file yet", "-", "Traceback\n" + oom + "\n", true},
		{"empty file yet", "", "Traceback\n" + oom + "\n", true},
		{"the last line late", "Traceback\n", "Traceback\n" + oom + "\n", true},
		{"another error", "", "ValueError: bad shape\n", false},
		{"no log at all", "-", "-", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "train.stderr.0")
			write := func(content string) {
				if content != "-" {
					must.NoError(t, os.WriteFile(path, []byte(content), 0o644))
				}
			}
			write(tc.before)
			pauses := 0
			oomLogPause = func(time.Duration) {
				if pauses++; pauses == 1 {
					write(tc.after)
				}
			}
			t.Cleanup(func() { oomLogPause = time.Sleep })
			line, ok := waitGPUOOMLine(dir, "train")
			must.Eq(t, tc.want, ok)
			if tc.want {
				must.Eq(t, oom, line)
			}
		})
	}
}
