package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/caravan-nomad/caravan/driver/protocol"
	"github.com/caravan-nomad/caravan/driver/store"
)

// sidecar is a checkpoint.role = "sidecar" task (lifecycle poststart,
// sidecar = true): every checkpoint.interval, and on its checkpoint signal
// (`nomad alloc signal -s SIGUSR1 ALLOC <sidecar task>`), it asks the main
// task for a checkpoint by writing the request file (protocol.RequestName)
// into the checkpoint directory, waits for a newer marker and commits it.
// It cannot signal the main task: that needs a token with alloc-lifecycle.
// It runs no process; it keeps the key's writer lease while it runs.
type sidecar struct {
	ckpt    *checkpointer
	cd      ckptDir
	lease   *leaseHolder // nil when the store has no lease directory
	stopped atomic.Bool
	stop    chan struct{} // closed by StopTask: the checkpointer's "exited"
	once    sync.Once
	reqSeq  atomic.Uint64
	logs    *roleLogs // its stdout and stderr, closed when it stops
}

// startSidecar starts the sidecar role's loop and returns its handle.
func (d *Driver) startSidecar(cfg *drivers.TaskConfig, cc *CheckpointConfig, cd ckptDir, key store.Key, started time.Time, logs *roleLogs, logger hclog.Logger) *taskHandle {
	events := newTaskEmitter(d.eventer, cfg)
	events.out = logs.stdout()
	s := &sidecar{cd: cd, stop: make(chan struct{}), logs: logs}
	s.ckpt = &checkpointer{
		logger:  logger.Named("checkpoint"),
		store:   d.checkpointStore,
		key:     key,
		dir:     cd.path(),
		cdir:    cd,
		node:    nodeName(cfg),
		allocID: cfg.AllocID,
		cfg:     cc,
		sig:     syscall.SIGUSR1, // unused: signal writes the request file
		signal:  s.request,
		exited:  s.stop,
		events:  events,
		metrics: d.metrics,
		onSaved: d.noteCommit,
		sem:     make(chan struct{}, 1),
	}
	if st, err := d.checkpointStore(); err == nil {
		if m, err := st.Latest(key); err == nil {
			s.ckpt.lastGen.Store(m.Generation)
			if seq, ok := parseSeq(m.Meta); ok {
				s.ckpt.lastSeq.Store(seq)
			}
		}
		if l, err := leasesOf(st, key); err == nil {
			s.lease = holdLease(d.ctx, l, cfg.AllocID, nodeName(cfg), leaseRunning, logger)
			s.ckpt.commitHook = s.onCommit
		} else {
			logger.Warn("no writer lease for the sidecar", "error", err)
		}
	}
	h := &taskHandle{
		taskConfig: cfg,
		procState:  drivers.TaskStateRunning,
		startedAt:  started,
		exitResult: &drivers.ExitResult{},
		logger:     logger,
		doneCh:     make(chan struct{}),
		ckpt:       s.ckpt,
		side:       s,
	}
	every := "on demand only"
	if cc.interval > 0 {
		every = "every " + cc.interval.String() + " and on demand"
	}
	events.emit(map[string]string{annotationReason: RoleSidecar},
		"Checkpoint sidecar for task %q started: requests %s through %s", cc.Task, every, protocol.RequestName)
	go s.ckpt.periodic(d.ctx)
	return h
}

// onCommit keeps the lease "committing" while a commit is in flight.
func (s *sidecar) onCommit(inFlight bool) {
	switch {
	case inFlight:
		s.lease.set(leaseCommitting)
	case s.stopped.Load():
		s.lease.set(leaseStopping)
	default:
		s.lease.set(leaseRunning)
	}
}

// request asks the main task for a checkpoint: a request file with a
// sequence above the one there (a restored one included), written through
// the checkpoint directory's os.Root so a link the container left there is
// replaced, never followed.
func (s *sidecar) request(os.Signal) error {
	parent, base, err := s.cd.prepare(-1, -1)
	if err != nil {
		return err
	}
	root, err := parent.OpenRoot(base)
	parent.Close()
	if err != nil {
		return fmt.Errorf("checkpoint dir: %w", err)
	}
	defer root.Close()
	seq := s.reqSeq.Load()
	if r, err := protocol.ReadRequestIn(root); err == nil {
		seq = max(seq, r.Sequence)
	}
	seq++
	tmp := "." + protocol.RequestName + ".tmp-" + strconv.FormatUint(seq, 10)
	_ = root.Remove(tmp)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", protocol.RequestName, err)
	}
	_, err = fmt.Fprintf(f, "{\"sequence\":%d}\n", seq)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, protocol.RequestName)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("write %s: %w", protocol.RequestName, err)
	}
	s.reqSeq.Store(seq)
	return nil
}

// signal serves `nomad alloc signal` to the sidecar: its checkpoint signal
// asks for an on-demand checkpoint.
func (s *sidecar) signal(ctx context.Context, h *taskHandle, name string) error {
	if name != s.ckpt.cfg.Signal {
		return fmt.Errorf("checkpoint sidecar: signal %s is not its checkpoint signal %s (checkpoint.signal); it runs no process to forward it to", name, s.ckpt.cfg.Signal)
	}
	if !h.IsRunning() {
		return errors.New("checkpoint sidecar: stopped")
	}
	s.ckpt.onDemand(ctx)
	return nil
}

// shutdown stops the sidecar within timeout: a request still waiting for
// the main task is given up, a commit in flight is let finish (its lease
// says "committing" meanwhile); then the lease is handed to the poststop
// commit task ("stopping") and the handle exits.
func (s *sidecar) shutdown(h *taskHandle, timeout time.Duration) {
	s.once.Do(func() {
		s.stopped.Store(true)
		close(s.stop)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		if s.ckpt.acquire(ctx) {
			s.ckpt.release()
		} else {
			s.ckpt.logger.Warn("sidecar stopped with a commit still in flight; its lease stays committing",
				"key", s.ckpt.key.String())
		}
		cancel()
		if s.lease != nil {
			if !s.ckpt.tryAcquire() {
				s.lease.halt() // the commit in flight keeps the lease "committing"
			} else {
				s.lease.set(leaseStopping)
				s.lease.halt()
				s.ckpt.release()
			}
		}
		h.stateLock.Lock()
		h.procState = drivers.TaskStateExited
		h.completedAt = time.Now()
		h.stateLock.Unlock()
		s.logs.close()
		close(h.doneCh)
	})
}

// sidecarStats reports an empty resource usage every interval while the
// sidecar runs: it has no process of its own.
func sidecarStats(ctx context.Context, h *taskHandle, interval time.Duration) <-chan *drivers.TaskResourceUsage {
	ch := make(chan *drivers.TaskResourceUsage)
	go func() {
		defer close(ch)
		t := time.NewTicker(max(interval, time.Second))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.doneCh:
				return
			case <-t.C:
				u := &drivers.TaskResourceUsage{ResourceUsage: &drivers.ResourceUsage{
					MemoryStats: &drivers.MemoryStats{}, CpuStats: &drivers.CpuStats{}}, Timestamp: time.Now().UnixNano()}
				select {
				case ch <- u:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return ch
}
