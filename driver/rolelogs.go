package driver

import (
	"errors"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/drivers"
)

// roleLogOpenWait bounds how long a role task waits for Nomad's log
// collector to open the read side of its log fifos.
const roleLogOpenWait = 2 * time.Second

// roleLogs are a role task's stdout and stderr: it runs no process, so the
// driver opens the write side of the task's two log fifos itself, writes
// the task's events to stdout, and closes both when the role's work is
// done. Nomad's log collector (logmon) waits for that close before the
// task's runner may finish: a fifo never opened held every role task for
// logmon's close tolerance (2 s + 2 s), and the allocation's next lifecycle
// step with it (a container job's stop with the sidecar took 8.5 s, not 1 s).
type roleLogs struct {
	out, err io.WriteCloser
}

// openRoleLogs opens the task's log fifos for writing. A path that is not
// there, or a fifo no reader opens within roleLogOpenWait, is left alone
// (logged): the role's work does not depend on its logs.
func openRoleLogs(cfg *drivers.TaskConfig, logger hclog.Logger) *roleLogs {
	return &roleLogs{
		out: openLogWriter(cfg.StdoutPath, logger),
		err: openLogWriter(cfg.StderrPath, logger),
	}
}

// openLogWriter opens path for writing without blocking on a fifo that has
// no reader yet, retrying until roleLogOpenWait; nil when it cannot.
func openLogWriter(path string, logger hclog.Logger) io.WriteCloser {
	if path == "" {
		return nil
	}
	deadline := time.Now().Add(roleLogOpenWait)
	for {
		f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err == nil {
			// Blocking writes from here on: the reader drains the fifo.
			if err := syscall.SetNonblock(int(f.Fd()), false); err != nil {
				logger.Debug("cannot make a role task's log blocking", "path", path, "error", err)
			}
			return f
		}
		if !errors.Is(err, syscall.ENXIO) || time.Now().After(deadline) {
			logger.Debug("role task log not opened", "path", path, "error", err)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stdout is where the role's events are written (nil: nowhere).
func (l *roleLogs) stdout() io.Writer {
	if l == nil || l.out == nil {
		return nil
	}
	return l.out
}

// close closes both fifos, which ends the log collector's copy.
func (l *roleLogs) close() {
	if l == nil {
		return
	}
	for _, w := range []io.WriteCloser{l.out, l.err} {
		if w != nil {
			_ = w.Close()
		}
	}
	l.out, l.err = nil, nil
}
