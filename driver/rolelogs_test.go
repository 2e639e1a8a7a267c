package driver

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"
)

// logReader reads a log fifo to its end, as Nomad's log collector does:
// its open waits for a writer, and it ends when the last writer closes.
type logReader struct {
	done chan struct{}
	text string
}

// fifoLogs gives cfg a stdout and a stderr fifo with a reader on each.
func fifoLogs(t *testing.T, cfg *drivers.TaskConfig) (stdout, stderr *logReader) {
	t.Helper()
	dir := t.TempDir()
	cfg.StdoutPath, cfg.StderrPath = filepath.Join(dir, "t.stdout.fifo"), filepath.Join(dir, "t.stderr.fifo")
	read := func(path string) *logReader {
		must.NoError(t, syscall.Mkfifo(path, 0o600))
		r := &logReader{done: make(chan struct{})}
		go func() {
			defer close(r.done)
			f, err := os.Open(path)
			if err != nil {
				return
			}
			defer f.Close()
			b, _ := io.ReadAll(f)
			r.text = string(b)
		}()
		return r
	}
	return read(cfg.StdoutPath), read(cfg.StderrPath)
}

// ended says whether the reader has seen its log end (within a minute, as
// a test must not hang: the reader blocks for ever on a fifo nobody opens).
func (r *logReader) ended() bool {
	select {
	case <-r.done:
		return true
	case <-time.After(time.Minute):
		return false
	}
}

// TestDriver_RoleTasksCloseTheirLogs: a role task runs no process, so the
// driver opens and closes its log fifos itself; Nomad's log collector waits
// for that close before the task may finish (before this, every role task
// held the allocation's next lifecycle step for its 2 s + 2 s close
// tolerance). A restore or commit closes both when its work is done, with
// its events in stdout; a sidecar keeps them open while it runs and closes
// them when it stops.
func TestDriver_RoleTasksCloseTheirLogs(t *testing.T) {
	td := newTestDriver(t, t.TempDir())
	restore := newTask(t, td, "client1", roleTask(RoleRestore))
	rOut, rErr := fifoLogs(t, restore)
	_, _, err := td.StartTask(restore)
	must.NoError(t, err)
	must.True(t, rOut.ended(), must.Sprint("the restore task's stdout was never closed"))
	must.True(t, rErr.ended(), must.Sprint("the restore task's stderr was never closed"))
	must.StrContains(t, rOut.text, "No checkpoint under default/train@1/g/trainer/0; starting fresh")

	side := sameAllocTask(t, restore, "checkpoint", sidecarTask("", "5s"))
	sOut, sErr := fifoLogs(t, side)
	_, _, err = td.StartTask(side)
	must.NoError(t, err)
	td.waitEvent(t, "Checkpoint sidecar for task \"trainer\" started")
	select {
	case <-sOut.done:
		t.Fatal("the sidecar's stdout closed while it runs")
	default:
	}
	must.NoError(t, td.StopTask(side.ID, 5*time.Second, "SIGINT"))
	must.True(t, sOut.ended(), must.Sprint("the sidecar's stdout was not closed when it stopped"))
	must.True(t, sErr.ended(), must.Sprint("the sidecar's stderr was not closed when it stopped"))
	must.StrContains(t, sOut.text, "Checkpoint sidecar for task \"trainer\" started")
}

// TestOpenLogWriter: a role task's log path that is a file is written; one
// that is not there is left alone, at once.
func TestOpenLogWriter(t *testing.T) {
	logger := hclog.NewNullLogger()
	file := filepath.Join(t.TempDir(), "t.stdout.0")
	must.NoError(t, os.WriteFile(file, nil, 0o644))
	w := openLogWriter(file, logger)
	must.NotNil(t, w)
	_, err := io.WriteString(w, "line\n")
	must.NoError(t, err)
	must.NoError(t, w.Close())
	b, err := os.ReadFile(file)
	must.NoError(t, err)
	must.Eq(t, "line\n", string(b))

	must.Nil(t, openLogWriter(filepath.Join(t.TempDir(), "absent", "t.stdout"), logger))
	must.Nil(t, openLogWriter("", logger))
}
