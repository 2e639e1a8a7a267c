package driver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/caravan-nomad/caravan/internal/bytesize"
	"github.com/caravan-nomad/caravan/internal/passwd"
	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/caravan-nomad/caravan/driver/protocol"
	"github.com/caravan-nomad/caravan/driver/store"
)

// checkpointDirName is the checkpoint directory inside the task's local dir
// ($NOMAD_TASK_DIR/checkpoint).
const checkpointDirName = "checkpoint"

// restoreTimeout bounds restoring a checkpoint in StartTask.
const restoreTimeout = 15 * time.Minute

// restored is the outcome of prepareCheckpoint.
type restored struct {
	state CheckpointState
	env   map[string]string
}

// prepareCheckpoint creates the task's checkpoint directory and restores the
// newest verifying checkpoint of key into it. A store that cannot be read
// fails the task unless the task chose on_restore_error = "start_fresh".
func (d *Driver) prepareCheckpoint(cfg *drivers.TaskConfig, tc *TaskConfig, key store.Key, events *taskEmitter) (*restored, error) {
	dir := filepath.Join(cfg.TaskDir().LocalDir, checkpointDirName)
	cd, err := newCkptDir(cfg.TaskDir().Dir, dir)
	if err != nil {
		return nil, err
	}
	uid, gid := -1, -1
	if cfg.User != "" {
		ids, err := passwd.LookupHost(cfg.User)
		if err != nil {
			return nil, fmt.Errorf("checkpoint dir: look up user %q: %w", cfg.User, err)
		}
		uid, gid = ids.UID, ids.GID
	}
	return d.restoreInto(cfg, tc.Checkpoint, cd, key, uid, gid, events)
}

// restoreInto makes cd a real directory owned by uid:gid (uid >= 0) and
// restores the newest verifying checkpoint of key into it, or empties it
// when there is none.
func (d *Driver) restoreInto(cfg *drivers.TaskConfig, cc *CheckpointConfig, cd ckptDir, key store.Key, uid, gid int, events *taskEmitter) (*restored, error) {
	dir := cd.path()
	parent, base, err := cd.prepare(uid, gid)
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	r := &restored{state: CheckpointState{Dir: dir, Key: key}}
	r.env = map[string]string{
		protocol.EnvDir:        dir,
		protocol.EnvSignal:     cc.Signal,
		protocol.EnvGeneration: "0",
		protocol.EnvSequence:   "0",
	}

	restoreErr := func(err error) (*restored, error) {
		if cc.OnRestoreError == OnRestoreErrorStartFresh {
			d.metrics.restore(outcomeStartFresh)
			events.emit(map[string]string{annotationReason: "restore"},
				"Checkpoint restore failed, starting fresh (on_restore_error = %q): %v", OnRestoreErrorStartFresh, err)
			if err := emptyDir(parent, base); err != nil {
				return nil, err
			}
			return r, nil
		}
		d.metrics.restore(outcomeFailed)
		return nil, fmt.Errorf("restore checkpoint %s (set checkpoint.on_restore_error = %q to start fresh instead): %w",
			key, OnRestoreErrorStartFresh, err)
	}

	st, err := d.checkpointStore()
	if err != nil {
		return restoreErr(err)
	}
	src, floor := key, uint64(0)
	if cc.Scope == ScopeReplica {
		if src, floor, err = newestReplica(st, key, d.logger); err != nil {
			return restoreErr(err)
		}
	}
	ctx, cancel := context.WithTimeout(d.ctx, restoreTimeout)
	defer cancel()
	res, err := st.RestoreRoot(ctx, src, parent, base)
	switch {
	case errors.Is(err, store.ErrNoCheckpoint) && !errors.Is(err, store.ErrCorrupt):
		d.logger.Info("no checkpoint to restore; starting fresh", "key", key.String(), "task_id", cfg.ID)
		d.metrics.restore(outcomeFresh)
		events.emit(nil, "No checkpoint under %s; starting fresh", key)
		// A fresh start is fresh: drop what an earlier attempt of this
		// allocation left behind but never committed.
		if err := emptyDir(parent, base); err != nil {
			return nil, err
		}
		return r, nil
	case err != nil:
		return restoreErr(err)
	}

	if err := d.noteRestored(cd, r, res, key, src, floor, events); err != nil {
		return nil, err
	}
	return r, nil
}

// noteRestored records a restore that succeeded: the generation, sequence
// and step the task is told (from the restored marker, else the manifest),
// the metrics, and the "Checkpoint restored" event. src is the key it came
// from (another replica's with scope "replica"), floor the sequence the
// marker is raised to.
func (d *Driver) noteRestored(cd ckptDir, r *restored, res *store.RestoreResult, key, src store.Key, floor uint64, events *taskEmitter) error {
	man := res.Manifest
	if len(res.FellBack) > 0 {
		d.metrics.restore(outcomeFellBack)
		events.emit(map[string]string{annotationGeneration: strconv.FormatUint(man.Generation, 10)},
			"Checkpoint generation %v failed verification, fell back to generation %d", res.FellBack, man.Generation)
	}
	d.metrics.restored(res.Duration, man.TotalBytes)
	r.state.RestoredGeneration = man.Generation
	r.env[protocol.EnvGeneration] = strconv.FormatUint(man.Generation, 10)
	r.env[protocol.EnvRestoredFrom] = man.Node
	ann := map[string]string{
		annotationGeneration: strconv.FormatUint(man.Generation, 10),
		annotationNode:       man.Node,
		annotationBytes:      strconv.FormatInt(man.TotalBytes, 10),
		annotationDuration:   res.Duration.String(),
	}
	at := ""
	if src != key {
		at = fmt.Sprintf(" of allocation index %d", src.Index)
	}
	if m, err := cd.readMarker(); err == nil {
		if err := raiseSequence(cd, m, floor); err != nil {
			return err
		}
		r.state.RestoredSequence = m.Sequence
		r.env[protocol.EnvSequence] = strconv.FormatUint(m.Sequence, 10)
		if m.Step != nil {
			s := strconv.FormatUint(*m.Step, 10)
			r.env[protocol.EnvStep], ann[annotationStep], at = s, s, " (step "+s+")"+at
		}
	} else if v, ok := man.Meta[store.MetaSequence]; ok {
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			r.state.RestoredSequence = n
			r.env[protocol.EnvSequence] = v
		}
	}
	age := time.Since(man.Created).Round(time.Second)
	ann[annotationAge] = age.String()
	events.emit(ann, "Checkpoint restored: generation %d%s from %s, %s old, %s in %s",
		man.Generation, at, man.Node, age, bytesize.Human(man.TotalBytes), res.Duration.Round(time.Millisecond))
	return nil
}

// raiseSequence rewrites the restored marker m with sequence floor when
// that is higher (scope "replica": the checkpoint came from another index,
// whose sequences are not this index's), so the task's next marker is
// newer than its own key's newest generation.
func raiseSequence(cd ckptDir, m *protocol.Marker, floor uint64) error {
	if floor <= m.Sequence {
		return nil
	}
	m.Sequence = floor
	if err := protocol.WriteMarker(cd.path(), m); err != nil {
		return fmt.Errorf("restore: raise the marker's sequence to %d: %w", floor, err)
	}
	return nil
}
