package driver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/caravan-nomad/caravan/driver/protocol"
	"github.com/caravan-nomad/caravan/driver/store"
)

// Lifecycle role tasks (checkpoint.role) checkpoint another task of their
// group through the allocation's shared directory, whatever that task's
// driver: a prestart "restore" task restores into it, a poststart sidecar
// (sidecar.go) commits periodically and on demand while the main task runs,
// a poststop "commit" task commits what the main task left there when it
// stopped. Restore and commit do their work in StartTask and exit; none runs
// a process.

// defaultRoleWait is checkpoint.wait_timeout's default: how long a restore
// waits for another running allocation of the same slot to finish.
const defaultRoleWait = 5 * time.Minute

// predecessorPoll is how often a restore asks Nomad about that allocation.
const predecessorPoll = time.Second

// errRoleExited answers requests to a role task, which has exited.
var errRoleExited = errors.New("a checkpoint.role task runs no process: it exited when its work was done")

// allocLister lists a job's allocations (Nomad's api.Jobs).
type allocLister interface {
	Allocations(jobID string, allAllocs bool, q *api.QueryOptions) ([]*api.AllocationListStub, *api.QueryMeta, error)
}

// newExitedHandle is the handle of a role task that exited successfully.
func newExitedHandle(cfg *drivers.TaskConfig, started time.Time, logger hclog.Logger) *taskHandle {
	done := make(chan struct{})
	close(done)
	return &taskHandle{
		taskConfig:  cfg,
		procState:   drivers.TaskStateExited,
		startedAt:   started,
		completedAt: time.Now(),
		exitResult:  &drivers.ExitResult{},
		logger:      logger,
		doneCh:      done,
	}
}

// startRoleTask runs a restore or commit role task to its end.
func (d *Driver) startRoleTask(cfg *drivers.TaskConfig, tc *TaskConfig, events *taskEmitter, logger hclog.Logger) (*drivers.TaskHandle, *drivers.DriverNetwork, error) {
	cc := tc.Checkpoint
	started := time.Now().Round(time.Millisecond)
	if _, err := d.checkpointStore(); errors.Is(err, errNoStore) {
		return nil, nil, fmt.Errorf("checkpoint.role = %q but %w (plugin config)", cc.Role, errNoStore)
	}
	target, err := d.roleTarget(cfg, cc, logger)
	if err != nil {
		return nil, nil, err
	}
	shared := cfg.TaskDir().SharedAllocDir
	cd, err := newCkptDir(shared, filepath.Join(shared, cc.Dir))
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint.dir: %w", err)
	}
	main := *cfg
	main.Name = cc.Task
	key, err := d.checkpointIdentity(&main, cc, events)
	if err != nil {
		return nil, nil, err
	}
	state := &TaskState{TaskConfig: cfg, DriverConfig: tc, StartedAt: started}
	logs := openRoleLogs(cfg, logger)
	events.out = logs.stdout()
	var h *taskHandle
	switch cc.Role {
	case RoleRestore:
		err = d.roleRestore(cfg, cc, cd, key, target, events, logger)
	case RoleCommit:
		err = d.roleCommit(cfg, cc, cd, key, events, logger)
	case RoleSidecar:
		h = d.startSidecar(cfg, cc, cd, key, started, logs, logger)
		state.Checkpoint = &CheckpointState{Dir: cd.path(), Key: key}
	}
	if h == nil {
		logs.close() // restore and commit are done; the sidecar closes its own
	}
	if err != nil {
		return nil, nil, err
	}
	if h == nil {
		h = newExitedHandle(cfg, started, logger)
	}
	handle := drivers.NewTaskHandle(taskHandleVersion)
	handle.Config = cfg
	if err := handle.SetDriverState(state); err != nil {
		if h.side != nil {
			h.side.shutdown(h, time.Second)
		}
		return nil, nil, fmt.Errorf("failed to set driver state: %w", err)
	}
	d.tasks.Set(cfg.ID, h)
	return handle, nil, nil
}

// recoverRoleTask reattaches a role task after a plugin restart: a sidecar
// starts its loop again on the same key; restore and commit had exited.
func (d *Driver) recoverRoleTask(ts *TaskState) error {
	cc := ts.DriverConfig.Checkpoint
	if cc.Role != RoleSidecar || ts.Checkpoint == nil {
		d.tasks.Set(ts.TaskConfig.ID, newExitedHandle(ts.TaskConfig, ts.StartedAt, d.logger))
		return nil
	}
	if err := cc.validate(); err != nil { // restores parsed durations
		return err
	}
	shared := ts.TaskConfig.TaskDir().SharedAllocDir
	cd, err := newCkptDir(shared, filepath.Join(shared, cc.Dir))
	if err != nil {
		return fmt.Errorf("checkpoint.dir: %w", err)
	}
	logger := d.logger.With("task_name", ts.TaskConfig.Name, "alloc_id", ts.TaskConfig.AllocID)
	logs := openRoleLogs(ts.TaskConfig, logger)
	d.tasks.Set(ts.TaskConfig.ID, d.startSidecar(ts.TaskConfig, cc, cd, ts.Checkpoint.Key, ts.StartedAt, logs, logger))
	return nil
}

// roleLifecycles is the lifecycle each role runs in.
var roleLifecycles = map[string]struct {
	hook    string
	sidecar bool
}{
	RoleRestore: {api.TaskLifecycleHookPrestart, false},
	RoleSidecar: {api.TaskLifecycleHookPoststart, true},
	RoleCommit:  {api.TaskLifecycleHookPoststop, false},
}

// allocDirDrivers says, for the task drivers caravan knows, whether the
// task sees the allocation's shared directory (at /alloc, or NOMAD_ALLOC_DIR
// for host processes): the role tasks reach the main task only through it.
// A driver a role task cannot reach (qemu: a virtual machine does not mount
// it) is refused; an unknown one is let through.
var allocDirDrivers = map[string]bool{
	"caravan": true, "docker": true, "podman": true, "exec": true, "exec2": true, "raw_exec": true,
	"java": true, "containerd-driver": true, "qemu": false,
}

// roleRestore waits until no other allocation of the same slot runs (its
// poststop commit may still be writing a newer generation), then restores
// the newest verifying generation into the shared directory.
func (d *Driver) roleRestore(cfg *drivers.TaskConfig, cc *CheckpointConfig, cd ckptDir, key store.Key, target *api.Task, events *taskEmitter, logger hclog.Logger) error {
	owner, err := d.roleOwner(target, cc, events)
	if err != nil {
		return err
	}
	wait := cc.waitTimeout
	if wait == 0 {
		wait = defaultRoleWait
	}
	deadline := time.Now().Add(wait)
	if err := d.waitPredecessors(cfg, cc, wait, events, logger); err != nil {
		return err
	}
	if err := d.waitLeases(cfg, cc, key, time.Until(deadline), events); err != nil {
		return err
	}
	_, err = d.restoreInto(cfg, cc, cd, key, owner.uid, owner.gid, events)
	return err
}

// roleTarget reads the job from Nomad, refuses a role its task cannot
// honour (checkRole) and returns the main task the role serves. When the
// job cannot be read it logs that and returns nil: nothing is checked.
func (d *Driver) roleTarget(cfg *drivers.TaskConfig, cc *CheckpointConfig, logger hclog.Logger) (*api.Task, error) {
	jobs := d.jobReader()
	if jobs == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(d.ctx, policyCheckTimeout)
	job, _, err := jobs.Info(cfg.JobID, (&api.QueryOptions{Namespace: taskNamespace(cfg)}).WithContext(ctx))
	cancel()
	if err != nil {
		logger.Info("cannot read the job to check the checkpoint role's lifecycle", "job_id", cfg.JobID, "error", err)
		return nil, nil
	}
	if err := checkRole(job, cfg.TaskGroupName, cfg.Name, cc); err != nil {
		return nil, err
	}
	return findTask(job, cfg.TaskGroupName, cc.Task), nil
}

// roleOwner resolves the owner of the main task's checkpoint directory
// (roleowner.go). Without the job (the Nomad API could not be read) it
// cannot be learnt: the directory stays the driver's, and an event says so.
func (d *Driver) roleOwner(target *api.Task, cc *CheckpointConfig, events *taskEmitter) (taskOwner, error) {
	if target == nil {
		events.emit(map[string]string{annotationReason: "restore"},
			"Cannot read the job to learn the user task %q runs as; its checkpoint directory stays owned by root (a non-root task cannot save into it)", cc.Task)
		return rootOwner, nil
	}
	return d.mainTaskOwner(d.ctx, target)
}

// waitPredecessors polls Nomad until no other allocation of this slot (the
// same allocation name; with scope "group", the same group) is running.
// Without the Nomad API it cannot tell, and says so in an event.
func (d *Driver) waitPredecessors(cfg *drivers.TaskConfig, cc *CheckpointConfig, wait time.Duration, events *taskEmitter, logger hclog.Logger) error {
	client, err := d.nomadClient()
	if err != nil {
		events.emit(map[string]string{annotationReason: "restore"},
			"Cannot ask Nomad whether an older allocation is still committing (%v); restoring the newest generation now", err)
		return nil
	}
	return waitAllocs(d.ctx, client.Jobs(), cfg, cc, wait, events, logger)
}

func waitAllocs(ctx context.Context, jobs allocLister, cfg *drivers.TaskConfig, cc *CheckpointConfig, wait time.Duration, events *taskEmitter, logger hclog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	announced := false
	for {
		stubs, _, err := jobs.Allocations(cfg.JobID, true, (&api.QueryOptions{Namespace: taskNamespace(cfg)}).WithContext(ctx))
		var busy []string
		if err == nil {
			busy = busyPredecessors(stubs, cfg, cc.Scope)
			if len(busy) == 0 {
				return nil
			}
			if !announced {
				announced = true
				events.emit(map[string]string{annotationReason: "restore"},
					"Waiting for allocation %s to finish (its checkpoint commit may be in flight)", strings.Join(busy, ", "))
			}
		} else {
			logger.Warn("cannot list the job's allocations", "error", err)
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("allocation %s still running", strings.Join(busy, ", "))
			}
			return fmt.Errorf("checkpoint.wait_timeout: not restoring while an older allocation may still commit: %w", err)
		case <-time.After(predecessorPoll):
		}
	}
}

// busyPredecessors are the IDs of the other allocations of the task's slot
// that Nomad reports running; with scope "group" any of the group's, with
// scope "replica" also any of the group's that Nomad is stopping (its
// poststop commit may write the group's newest checkpoint).
func busyPredecessors(stubs []*api.AllocationListStub, cfg *drivers.TaskConfig, scope string) []string {
	var busy []string
	for _, s := range stubs {
		if s.ID == cfg.AllocID || s.ClientStatus != api.AllocClientStatusRunning || s.TaskGroup != cfg.TaskGroupName {
			continue
		}
		stopping := scope == ScopeReplica && s.DesiredStatus != api.AllocDesiredStatusRun
		if scope == ScopeGroup || stopping || s.Name == cfg.Env["NOMAD_ALLOC_NAME"] {
			busy = append(busy, s.ID)
		}
	}
	return busy
}

// roleCommit commits the marker the main task left in the shared directory
// if it is newer than the key's newest generation.
func (d *Driver) roleCommit(cfg *drivers.TaskConfig, cc *CheckpointConfig, cd ckptDir, key store.Key, events *taskEmitter, logger hclog.Logger) error {
	c := &checkpointer{
		logger:  logger.Named("checkpoint"),
		store:   d.checkpointStore,
		key:     key,
		dir:     cd.path(),
		cdir:    cd,
		node:    nodeName(cfg),
		allocID: cfg.AllocID,
		cfg:     cc,
		events:  events,
		metrics: d.metrics,
		onSaved: d.noteCommit,
	}
	st, err := d.checkpointStore()
	if err != nil {
		c.failed(reasonExit, err)
		return fmt.Errorf("commit checkpoint %s: %w", key, err)
	}
	if m, err := st.Latest(key); err == nil {
		c.lastGen.Store(m.Generation)
		if seq, ok := parseSeq(m.Meta); ok {
			c.lastSeq.Store(seq)
		}
	}
	if l, err := leasesOf(st, key); err == nil {
		// Committing, renewed until this commit ends; then the key is free
		// (this allocation's sidecar lease, "stopping", goes with it).
		lease := holdLease(d.ctx, l, cfg.AllocID, nodeName(cfg), leaseCommitting, logger)
		defer lease.release()
	} else {
		logger.Warn("no writer lease for the commit", "error", err)
	}
	// A marker the container made a link, FIFO or huge file is refused
	// unread, and said so (commitIfNew would report it as no marker).
	if _, err := cd.readMarker(); err != nil && !errors.Is(err, protocol.ErrNoMarker) {
		c.failed(reasonExit, fmt.Errorf("%s of task %q: %w", protocol.MarkerName, cc.Task, err))
		return fmt.Errorf("commit checkpoint %s: %w", key, err)
	}
	ctx, cancel := context.WithTimeout(d.ctx, commitTimeout)
	defer cancel()
	err = c.commitIfNew(ctx, reasonExit)
	if errors.Is(err, errNoNewMarker) {
		events.emit(map[string]string{annotationReason: reasonExit},
			"No new checkpoint of task %q to commit (generation %d stays the newest)", cc.Task, c.lastGen.Load())
		return nil
	}
	if err != nil {
		return fmt.Errorf("commit checkpoint %s: %w", key, err)
	}
	return nil
}
