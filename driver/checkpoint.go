package driver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul-template/signals"
	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/caravan-nomad/caravan/driver/protocol"
	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/internal/bytesize"
)

// Why a checkpoint was taken (event annotation and manifest meta).
const (
	reasonStop     = "stop"
	reasonPeriodic = "periodic"
	reasonOnDemand = "on demand"
	reasonExit     = "exit"
	reasonRecover  = "recovered"
)

// markerPoll is how often the checkpoint directory is polled for a new
// marker while a checkpoint is pending.
const markerPoll = 10 * time.Millisecond

// commitAbandonGrace is how long a commit past its deadline may take to
// notice; after that it is left running in the background.
const commitAbandonGrace = time.Second

var (
	// errTaskExited means the task exited without writing a new marker.
	errTaskExited = errors.New("task exited before marking a checkpoint complete")
	// errNoNewMarker means there was nothing new to commit.
	errNoNewMarker = errors.New("no new checkpoint marker")
)

// checkpointer runs the checkpoint protocol for one task: signal, wait for a
// marker with a new sequence, commit the directory to the store, emit an
// event. One checkpoint runs at a time.
type checkpointer struct {
	logger  hclog.Logger
	store   func() (*store.Store, error)
	key     store.Key
	dir     string  // as the task sees it
	cdir    ckptDir // how the driver reaches it
	node    string
	allocID string
	cfg     *CheckpointConfig
	sig     os.Signal
	signal  func(os.Signal) error
	exited  <-chan struct{}
	events  *taskEmitter
	metrics *driverMetrics
	onSaved func(store.Key) // tells the GC loop a commit happened
	// commitHook, when set, is called with true before a commit to the
	// store and with false after it (a checkpoint role's writer lease).
	commitHook func(inFlight bool)

	sem     chan struct{} // capacity 1: the checkpoint in flight
	lastSeq atomic.Uint64 // sequence of the last marker committed or restored
	lastGen atomic.Uint64 // generation of the last checkpoint committed or restored
	// recovering is set while RecoverTask's commit of a marker the task
	// completed earlier holds the slot (it sends no signal).
	recovering atomic.Bool
}

// acquire waits for the checkpoint slot until ctx is done.
func (c *checkpointer) acquire(ctx context.Context) bool {
	select {
	case c.sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (c *checkpointer) tryAcquire() bool {
	select {
	case c.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

func (c *checkpointer) release() { <-c.sem }

// checkpoint asks the task for a checkpoint and commits it. waitCtx bounds
// the wait for the marker, commitCtx the commit. The caller holds the slot.
func (c *checkpointer) checkpoint(waitCtx, commitCtx context.Context, reason string) error {
	// Wait for a marker newer than the one in the directory now, even if
	// that one was never committed (a failed commit): the files beside it
	// may be rewritten as soon as the task gets the signal.
	base := c.lastSeq.Load()
	if m, err := c.cdir.readMarker(); err == nil {
		base = max(base, m.Sequence)
	}
	start := time.Now()
	if err := c.signal(c.sig); err != nil {
		select {
		case <-c.exited:
		default:
			err = fmt.Errorf("send %s: %w", c.cfg.Signal, err)
			c.failed(reason, err)
			return err
		}
	}
	m, err := c.waitMarker(waitCtx, base)
	if err != nil {
		c.failed(reason, err)
		return err
	}
	return c.commit(commitCtx, m, reason, time.Since(start))
}

// waitMarker polls for a marker with a sequence above base until ctx is
// done or the task exits (then it looks once more).
func (c *checkpointer) waitMarker(ctx context.Context, base uint64) (*protocol.Marker, error) {
	t := time.NewTicker(markerPoll)
	defer t.Stop()
	var lastErr error
	for {
		m, err := c.cdir.readMarker()
		switch {
		case err == nil && m.Sequence > base:
			return m, nil
		case err == nil:
			lastErr = fmt.Errorf("marker sequence %d is not above %d", m.Sequence, base)
		case !errors.Is(err, protocol.ErrNoMarker):
			lastErr = err
		}
		select {
		case <-ctx.Done():
			msg := fmt.Errorf("timed out waiting for %s with a sequence above %d", protocol.MarkerName, base)
			if lastErr != nil {
				msg = fmt.Errorf("%w (last: %w)", msg, lastErr)
			}
			return nil, msg
		case <-c.exited:
			m, err := c.cdir.readMarker()
			if err == nil && m.Sequence > base {
				return m, nil
			}
			return nil, errTaskExited
		case <-t.C:
		}
	}
}

// commitIfNew commits a marker the task wrote on its own (e.g. on its kill
// signal). The caller holds the slot.
func (c *checkpointer) commitIfNew(ctx context.Context, reason string) error {
	m, err := c.cdir.readMarker()
	if err != nil || m.Sequence <= c.lastSeq.Load() {
		return errNoNewMarker
	}
	return c.commit(ctx, m, reason, 0)
}

func (c *checkpointer) commit(ctx context.Context, m *protocol.Marker, reason string, waited time.Duration) error {
	if m.Skip {
		c.skipped(m, reason)
		return nil
	}
	st, err := c.store()
	if err != nil {
		c.failed(reason, err)
		return err
	}
	if c.commitHook != nil {
		c.commitHook(true)
		defer c.commitHook(false)
	}
	meta, dropped := manifestMeta(m, c.allocID, reason)
	if len(dropped) > 0 {
		c.logger.Warn("marker meta keys are the driver's; the task's values are not stored", "key", c.key.String(),
			"meta_keys", dropped, "sequence", m.Sequence)
	}
	step := meta[store.MetaStep]
	man, stats, err := c.commitBounded(ctx, st, meta)
	if errors.Is(err, store.ErrStale) {
		c.stale(m, reason, err)
		return nil
	}
	if err != nil {
		err = fmt.Errorf("commit to store: %w", err)
		c.failed(reason, err)
		return err
	}
	c.saved(m, man, stats, reason, step, waited)
	return nil
}

// Manifest meta keys the driver writes. The store orders a key's
// generations by step and sequence; the task's marker meta never sets any
// of them, so ordering comes only from the marker's validated sequence and
// step.
const (
	metaAllocID = "alloc_id"
	metaReason  = "reason"
)

// driverMetaKeys are the manifest meta keys only the driver sets.
var driverMetaKeys = []string{store.MetaStep, store.MetaSequence, metaAllocID, metaReason}

// manifestMeta is the manifest meta of marker m: the task's free-form meta
// without the driver's keys (returned as dropped, sorted), then the driver's
// from the marker's own fields. A marker without a step stores none.
func manifestMeta(m *protocol.Marker, allocID, reason string) (meta map[string]string, dropped []string) {
	meta = maps.Clone(m.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	for _, k := range driverMetaKeys {
		if _, ok := meta[k]; ok {
			dropped = append(dropped, k)
			delete(meta, k)
		}
	}
	slices.Sort(dropped)
	meta[store.MetaSequence] = strconv.FormatUint(m.Sequence, 10)
	meta[metaAllocID] = allocID
	meta[metaReason] = reason
	if m.Step != nil {
		meta[store.MetaStep] = strconv.FormatUint(*m.Step, 10)
	}
	return meta, dropped
}

// commitBounded commits the checkpoint directory, returning by ctx's
// deadline whatever the I/O does: a commit stuck in a system call (a hung
// network file system) is left to finish in the background, where its
// outcome is still logged, and the previous generation stays the newest
// until it does.
func (c *checkpointer) commitBounded(ctx context.Context, st *store.Store, meta map[string]string) (*store.Manifest, store.CommitStats, error) {
	type result struct {
		man   *store.Manifest
		stats store.CommitStats
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		src, err := c.cdir.open()
		if err != nil {
			r.err = err
		} else {
			r.man, r.stats, r.err = st.CommitRoot(ctx, c.key, src, c.node, meta)
			_ = src.Close()
		}
		done <- r
	}()
	select {
	case r := <-done:
		return r.man, r.stats, r.err
	case <-ctx.Done():
	}
	// A commit that honours ctx returns at once; one that does not is
	// abandoned.
	select {
	case r := <-done:
		return r.man, r.stats, r.err
	case <-time.After(commitAbandonGrace):
	}
	go func() {
		r := <-done
		c.logger.Warn("abandoned checkpoint commit finished", "key", c.key.String(), "error", r.err)
	}()
	return nil, store.CommitStats{}, fmt.Errorf("did not finish in time (%w); left running in the background", context.Cause(ctx))
}

// saved records and announces a committed checkpoint.
func (c *checkpointer) saved(m *protocol.Marker, man *store.Manifest, stats store.CommitStats, reason, step string, waited time.Duration) {
	c.lastSeq.Store(m.Sequence)
	c.lastGen.Store(man.Generation)
	c.metrics.saved(reason, stats, waited)
	if c.onSaved != nil {
		c.onSaved(c.key)
	}
	c.logger.Info("checkpoint saved", "key", c.key.String(), "generation", man.Generation, "sequence", m.Sequence,
		"step", step, "bytes", stats.Bytes, "new_bytes", stats.NewBytes, "commit_duration", stats.Duration,
		"task_duration", waited, "reason", reason)
	ann := map[string]string{
		annotationGeneration: strconv.FormatUint(man.Generation, 10),
		annotationBytes:      strconv.FormatInt(stats.Bytes, 10),
		annotationNewBytes:   strconv.FormatInt(stats.NewBytes, 10),
		annotationDuration:   stats.Duration.String(),
		annotationReason:     reason,
	}
	if waited > 0 {
		ann[annotationTaskDuration] = waited.String()
	}
	at := ""
	if step != "" {
		ann[annotationStep] = step
		at = " at step " + step
	}
	c.events.emit(ann, "Checkpoint saved (%s): generation %d%s, %s (%s new) in %s",
		reason, man.Generation, at, bytesize.Human(stats.Bytes), bytesize.Human(stats.NewBytes),
		stats.Duration.Round(time.Millisecond))
}

// skipped records a skip marker: the task acknowledged the request with
// nothing to commit. Only the stop and exit outcomes become events, so the
// periodic checkpoints of non-writer ranks do not push out the task's others.
func (c *checkpointer) skipped(m *protocol.Marker, reason string) {
	c.lastSeq.Store(m.Sequence)
	c.metrics.outcome(reason, outcomeSkipped)
	c.logger.Info("checkpoint skipped by the task: nothing to commit", "key", c.key.String(),
		"sequence", m.Sequence, "reason", reason)
	if reason == reasonStop || reason == reasonExit {
		c.events.emit(map[string]string{annotationReason: reason},
			"Checkpoint not needed (%s): the task has nothing to commit (skip marker, sequence %d)", reason, m.Sequence)
	}
}

// stale records a commit the store refused because a newer generation of
// the key exists (another member of the group committed later training).
func (c *checkpointer) stale(m *protocol.Marker, reason string, err error) {
	c.lastSeq.Store(m.Sequence) // never offered again
	c.metrics.outcome(reason, outcomeStale)
	c.logger.Warn("stale checkpoint skipped", "key", c.key.String(), "sequence", m.Sequence,
		"reason", reason, "error", err)
	c.events.emit(map[string]string{annotationReason: reason, annotationStale: "true"},
		"Stale checkpoint skipped (%s): %v; the newer generation is kept", reason, err)
}

func (c *checkpointer) failed(reason string, err error) {
	kept := "no earlier checkpoint"
	if g := c.lastGen.Load(); g > 0 {
		kept = fmt.Sprintf("generation %d kept", g)
	}
	c.metrics.outcome(reason, outcomeFailed)
	c.logger.Warn("checkpoint failed", "key", c.key.String(), "reason", reason, "error", err)
	c.events.emit(map[string]string{annotationReason: reason},
		"Checkpoint failed (%s): %v; %s", reason, err, kept)
}

// onDemand starts a checkpoint in the background (the checkpoint signal
// sent through `nomad alloc signal`). A request while one is in flight is
// folded into it.
//
// The recovered commit of RecoverTask does not ask the task for anything,
// so a request arriving while it runs waits for it (up to the checkpoint
// timeout) instead of being folded into it and lost.
func (c *checkpointer) onDemand(parent context.Context) {
	run := func() {
		defer c.release()
		ctx, cancel := context.WithTimeout(parent, c.cfg.timeout)
		defer cancel()
		commitCtx, cancelCommit := context.WithTimeout(parent, commitTimeout)
		defer cancelCommit()
		_ = c.checkpoint(ctx, commitCtx, reasonOnDemand)
	}
	if c.tryAcquire() {
		go run()
		return
	}
	if !c.recovering.Load() {
		c.logger.Info("checkpoint already in progress; request folded into it", "key", c.key.String())
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(parent, c.cfg.timeout)
		defer cancel()
		if !c.acquire(ctx) {
			c.logger.Warn("on-demand checkpoint dropped: the recovered commit did not finish in time", "key", c.key.String())
			return
		}
		run()
	}()
}

// periodic takes a checkpoint every interval until the task exits or ctx
// is done.
func (c *checkpointer) periodic(ctx context.Context) {
	if c.cfg.interval <= 0 {
		return
	}
	t := time.NewTicker(c.cfg.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.exited:
			return
		case <-t.C:
			if !c.tryAcquire() {
				continue // one is in flight already
			}
			wctx, cancel := context.WithTimeout(ctx, c.cfg.timeout)
			cctx, cancelCommit := context.WithTimeout(ctx, commitTimeout)
			_ = c.checkpoint(wctx, cctx, reasonPeriodic)
			cancelCommit()
			cancel()
			c.release()
		}
	}
}

func (d *Driver) newCheckpointer(cfg *drivers.TaskConfig, cc *CheckpointConfig, cs *CheckpointState, h *taskHandle, logger hclog.Logger) *checkpointer {
	cdir, err := newCkptDir(cfg.TaskDir().Dir, cs.Dir)
	if err != nil {
		logger.Warn("checkpoint dir outside the task dir; anchoring at its parent", "error", err)
		cdir = ckptDir{taskDir: filepath.Dir(cs.Dir), rel: filepath.Base(cs.Dir)}
	}
	return &checkpointer{
		logger:  logger.Named("checkpoint"),
		store:   d.checkpointStore,
		key:     cs.Key,
		dir:     cs.Dir,
		cdir:    cdir,
		node:    nodeName(cfg),
		allocID: cfg.AllocID,
		cfg:     cc,
		sig:     signals.SignalLookup[cc.Signal],
		signal:  h.exec.Signal,
		exited:  h.doneCh,
		events:  newTaskEmitter(d.eventer, cfg),
		metrics: d.metrics,
		onSaved: d.noteCommit,
		sem:     make(chan struct{}, 1),
	}
}

// nodeName names the node in manifests and "restored from" events: the
// Nomad node name, or the host name outside a Nomad client.
func nodeName(cfg *drivers.TaskConfig) string {
	if cfg.NodeName != "" {
		return cfg.NodeName
	}
	h, _ := os.Hostname()
	return h
}

// parseSeq reads the marker sequence the driver stores in manifest meta.
func parseSeq(meta map[string]string) (uint64, bool) {
	n, err := strconv.ParseUint(meta[store.MetaSequence], 10, 64)
	return n, err == nil
}
