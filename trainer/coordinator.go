package trainer

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// ServerOptions are the run-time inputs of a parameter server.
type ServerOptions struct {
	// Listener accepts workers' (and, on the coordinator, members')
	// connections; Advertise is the address peers dial (default: its own).
	Listener  net.Listener
	Advertise string
	// Coordinator finds the coordinating server (shard servers only).
	Coordinator Locator
	// Dir, MinSequence: the checkpoint directory and the driver's sequence
	// floor. The coordinator writes the full state there; a shard server
	// answers with skip markers.
	Dir         string
	MinSequence uint64
	Requests    <-chan Request
	Out         io.Writer
	Reporter    Reporter
	Identity    Progress
	// AfterStep, if set, is called by the coordinator after every step.
	AfterStep func(step uint64)
}

func (o *ServerOptions) advertise() string {
	if o.Advertise != "" {
		return o.Advertise
	}
	return o.Listener.Addr().String()
}

// member is a worker or shard server connected to the coordinator.
type member struct {
	id      int
	role    role
	addr    string // a shard server's data address
	c       *conn
	replies chan *message // a shard server's replies to the coordinator
	gone    chan struct{} // closed when its connection ends
	leaving bool
}

type evKind int

const (
	evJoin evKind = iota + 1
	evGone
	evDone
	evLeave
)

type event struct {
	kind evKind
	m    *member
	msg  *message
}

// coordinator is parameter server 0: it holds a slice like every server,
// and also the membership, the assignment of micro-shards to workers, the
// layout of slices over servers, the checkpoints and the progress reports.
type coordinator struct {
	cfg    Config
	o      ServerOptions
	data   *Dataset
	local  *shard
	events chan event
	nextID int

	workers []*member
	servers []*member // shard servers, in join order
	layout  []*member // slice holders in order; nil is the local slice
	epoch   uint64
	step    uint64
	seq     uint64

	owner  []int // micro-shard -> worker id (-1: unassigned)
	done   []bool
	losses []float64
	left   int

	res   *Result
	win   window
	stats GradStats // gradient statistics of the current window
}

// window accumulates progress between two log lines.
type window struct {
	start time.Time
	steps uint64
	loss  float64
}

// RunCoordinator trains c as the coordinating parameter server until
// c.Steps, an exit request, or ctx is done.
func RunCoordinator(ctx context.Context, c Config, o ServerOptions) (*Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	co := &coordinator{cfg: c, o: o, data: NewDataset(c), local: &shard{}, events: make(chan event, 1024),
		res: &Result{}, seq: o.MinSequence}
	st, err := co.restore()
	if err != nil {
		return nil, err
	}
	co.res.StartStep = st.Step
	co.distribute(st)
	fmt.Fprintf(o.Out, "training %s %s role=coordinator listen=%s start_step=%d\n",
		c, c.ComputeLabel(), o.advertise(), st.Step)
	go acceptLoop(o.Listener, co.accept)
	defer co.finish()

	var rep *asyncReporter
	if o.Reporter != nil {
		var once sync.Once // an unreachable planner is logged once, never stops training
		rep = newAsyncReporter(ctx, o.Reporter, func(err error) {
			once.Do(func() { fmt.Fprintf(o.Out, "progress report failed (not logged again): %v\n", err) })
		})
		defer rep.Close()
	}
	return co.loop(ctx, rep)
}

// restore loads the checkpoint in o.Dir, or the initial state.
func (co *coordinator) restore() (*State, error) {
	if co.o.Dir != "" {
		st, err := LoadCheckpoint(co.cfg, co.o.Dir)
		if err != nil {
			return nil, fmt.Errorf("resume from %s: %w", co.o.Dir, err)
		}
		if st != nil {
			if len(st.Params) != ParamCount(co.cfg) {
				return nil, fmt.Errorf("resume from %s: %w", co.o.Dir, ErrFingerprint)
			}
			co.seq = max(co.seq, st.Sequence)
			fmt.Fprintf(co.o.Out, "resumed step=%d sequence=%d\n", st.Step, st.Sequence)
			return st, nil
		}
	}
	m := NewModel(co.cfg)
	return &State{Params: m.Params, Velocity: m.Velocity}, nil
}

func (co *coordinator) loop(ctx context.Context, rep *asyncReporter) (*Result, error) {
	co.win = window{start: time.Now()}
	for co.step < co.cfg.Steps {
		for co.left > 0 {
			select {
			case <-ctx.Done():
				return co.interrupted(), nil
			case r := <-co.o.Requests:
				if stop, err := co.request(r); err != nil || stop {
					return co.interrupted(), err
				}
			case ev := <-co.events:
				co.handle(ev)
			}
		}
		co.endStep(rep)
	}
	return co.final(), nil
}

func (co *coordinator) interrupted() *Result {
	co.res.Interrupted, co.res.Step = true, co.step
	if st, err := co.gather(); err == nil {
		co.res.Hash = (&Model{Params: st.Params}).Hash()
	}
	fmt.Fprintf(co.o.Out, "interrupted step=%d params_sha256=%s\n", co.step, co.res.Hash)
	return co.res
}

func (co *coordinator) final() *Result {
	st, err := co.gather()
	if err != nil {
		fmt.Fprintf(co.o.Out, "final state lost (%v): replaying\n", err)
		return co.interrupted()
	}
	m := &Model{Features: co.cfg.Features, Hidden: co.cfg.Hidden, Params: st.Params, Velocity: st.Velocity}
	co.res.Step, co.res.Hash = co.step, m.Hash()
	co.res.Loss, co.res.Accuracy = m.Loss(co.data)
	fmt.Fprintf(co.o.Out, "final step=%d loss=%.6f accuracy=%.4f params_sha256=%s\n", co.step, co.res.Loss, co.res.Accuracy, co.res.Hash)
	return co.res
}

// finish stops accepting and, when training is over, tells every member;
// after an interruption members just lose the connection and wait for the
// next coordinator.
func (co *coordinator) finish() {
	_ = co.o.Listener.Close()
	for _, m := range append(append([]*member(nil), co.workers...), co.servers...) {
		if !co.res.Interrupted {
			_ = m.c.send(&message{Kind: msgFinish})
		}
		m.c.close()
	}
}

// request serves a checkpoint or exit request; stop means exit now.
func (co *coordinator) request(r Request) (stop bool, err error) {
	if r == RequestCheckpoint || r == RequestCheckpointAndExit {
		if err := co.checkpoint(); err != nil {
			return true, err
		}
	}
	return r != RequestCheckpoint, nil
}

func (co *coordinator) checkpoint() error {
	if co.o.Dir == "" {
		fmt.Fprintln(co.o.Out, "checkpoint requested but no checkpoint directory is set; ignoring")
		return nil
	}
	st, err := co.gather()
	if err != nil {
		co.replay(err)
		if st, err = co.gather(); err != nil {
			return err
		}
	}
	start := time.Now()
	co.seq++
	if err := SaveCheckpoint(co.cfg, co.o.Dir, st, co.seq, (&Model{Params: st.Params}).Hash()); err != nil {
		return fmt.Errorf("checkpoint at step %d: %w", st.Step, err)
	}
	co.res.Checkpoints++
	fmt.Fprintf(co.o.Out, "checkpoint step=%d sequence=%d ps=%d duration=%s\n", st.Step, co.seq, len(co.layout), time.Since(start).Round(time.Microsecond))
	return nil
}

// endStep closes a finished step: progress, and the next step's work.
func (co *coordinator) endStep(rep *asyncReporter) {
	loss := 0.0
	for _, l := range co.losses {
		loss += l
	}
	co.step++
	co.win.steps++
	co.win.loss += loss / float64(co.cfg.Batch)
	if co.o.AfterStep != nil {
		co.o.AfterStep(co.step)
	}
	if co.cfg.LogEvery > 0 && (co.step%co.cfg.LogEvery == 0 || co.step == co.cfg.Steps) {
		co.logProgress(rep)
	}
	if co.step < co.cfg.Steps {
		co.startStep()
	}
}

func (co *coordinator) logProgress(rep *asyncReporter) {
	elapsed := max(time.Since(co.win.start).Seconds(), 1e-9)
	sps := float64(co.win.steps) * float64(co.cfg.Batch) / elapsed
	loss := co.win.loss / float64(co.win.steps)
	sqr, gvar, ok := co.stats.Estimate(co.cfg.Batch)
	fmt.Fprintf(co.o.Out, "step=%d loss=%.6f samples_per_sec=%.0f workers=%d ps=%d%s\n", co.step, loss, sps, len(co.workers), len(co.layout), gradFields(sqr, gvar, ok))
	if rep != nil {
		p := co.o.Identity
		p.Step, p.StepsTotal, p.Loss, p.SamplesPerSec, p.BatchSize, p.Time = co.step, co.cfg.Steps, loss, sps, co.cfg.Batch, time.Now()
		p.StepsPerSec = float64(co.win.steps) / elapsed
		p.Workers, p.PS = len(co.workers), len(co.layout)
		p.GradSqr, p.GradVar = sqr, gvar
		p.Checkpointed, p.Done = co.res.Checkpoints > 0, co.step == co.cfg.Steps
		rep.Report(p)
	}
	co.win, co.stats = window{start: time.Now()}, GradStats{}
}

// startStep resets the step's bookkeeping and hands all micro-shards out.
func (co *coordinator) startStep() {
	n := co.cfg.MicroShards
	co.owner, co.done, co.losses, co.left = make([]int, n), make([]bool, n), make([]float64, n), n
	all := make([]int, n)
	for i := range all {
		co.owner[i], all[i] = -1, i
	}
	co.assign(all)
}

// assign splits shards into contiguous runs over the workers.
func (co *coordinator) assign(shards []int) {
	nw := len(co.workers)
	if nw == 0 {
		return
	}
	layout := co.ranges()
	for i, w := range co.workers {
		part := shards[i*len(shards)/nw : (i+1)*len(shards)/nw]
		if len(part) == 0 {
			continue
		}
		for _, s := range part {
			co.owner[s] = w.id
		}
		// A failed send shows up as the worker's evGone, which hands the
		// shards out again.
		_ = w.c.send(&message{Kind: msgAssign, Step: co.step, Epoch: co.epoch, Shards: part, Layout: layout})
	}
}

// unowned lists the step's micro-shards that are neither done nor held by
// a worker.
func (co *coordinator) unowned() []int {
	var out []int
	for s, o := range co.owner {
		if o < 0 && !co.done[s] {
			out = append(out, s)
		}
	}
	return out
}

func (co *coordinator) ranges() []Range {
	addrs := make([]string, len(co.layout))
	for i, m := range co.layout {
		addrs[i] = co.o.advertise()
		if m != nil {
			addrs[i] = m.addr
		}
	}
	return splitRanges(ParamCount(co.cfg), addrs)
}

// handle applies one membership or progress event.
func (co *coordinator) handle(ev event) {
	switch ev.kind {
	case evJoin:
		co.join(ev.m)
	case evGone:
		co.gone(ev.m)
	case evLeave:
		ev.m.leaving = true
		fmt.Fprintf(co.o.Out, "ps %s leaving: taking its slice at step=%d\n", ev.m.addr, co.step)
		co.reshard()
		_ = ev.m.c.send(&message{Kind: msgRelease})
	case evDone:
		co.doneShards(ev.m, ev.msg)
	}
}

func (co *coordinator) join(m *member) {
	co.nextID++
	m.id = co.nextID
	if m.role == roleServer {
		co.servers = append(co.servers, m)
		fmt.Fprintf(co.o.Out, "ps %s joined at step=%d\n", m.addr, co.step)
		co.reshard()
		return
	}
	co.workers = append(co.workers, m)
	fmt.Fprintf(co.o.Out, "worker %d joined at step=%d workers=%d\n", m.id, co.step, len(co.workers))
	if free := co.unowned(); len(free) > 0 {
		co.assign(free)
	}
}

func (co *coordinator) gone(m *member) {
	if m.role == roleWorker {
		co.workers = removeMember(co.workers, m)
		fmt.Fprintf(co.o.Out, "worker %d left at step=%d workers=%d\n", m.id, co.step, len(co.workers))
		for s, o := range co.owner {
			if o == m.id && !co.done[s] {
				co.owner[s] = -1
			}
		}
		co.assign(co.unowned())
		return
	}
	co.servers = removeMember(co.servers, m)
	for _, l := range co.layout {
		if l == m {
			co.replay(fmt.Errorf("ps %s vanished without handing off its slice", m.addr))
			return
		}
	}
}

func removeMember(ms []*member, m *member) []*member {
	out := ms[:0]
	for _, x := range ms {
		if x != m {
			out = append(out, x)
		}
	}
	return out
}

func (co *coordinator) doneShards(w *member, m *message) {
	if m.Step != co.step || m.Epoch != co.epoch {
		return // work of an aborted step or layout
	}
	if m.Err != "" {
		fmt.Fprintf(co.o.Out, "worker %d failed step=%d: %s; handing its shards out again\n", w.id, m.Step, m.Err)
		for _, s := range m.Shards {
			if !co.done[s] && co.owner[s] == w.id {
				co.owner[s] = -1
			}
		}
		co.assign(co.unowned())
		return
	}
	fresh := true
	for i, s := range m.Shards {
		if s >= 0 && s < len(co.done) && !co.done[s] && i < len(m.Losses) {
			co.done[s], co.losses[s] = true, m.Losses[i]
			co.left--
		} else {
			fresh = false
		}
	}
	// Statistics count only when every shard of the message was new, so a
	// re-done shard is never counted twice.
	if fresh && m.Stats != nil {
		co.stats.Add(*m.Stats)
	}
}
