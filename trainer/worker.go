package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// WorkerOptions are the run-time inputs of a worker.
type WorkerOptions struct {
	Coordinator Locator
	Out         io.Writer
	// ComputePerSample, when > 0, overrides the job's MODELLED compute
	// time per sample for this worker.
	ComputePerSample time.Duration
	// GPU is the worker's MODELLED GPU profile (Options.GPU).
	GPU GPUProfile
}

// worker computes the micro-shard gradients it is assigned. It holds no
// state worth keeping: a worker that goes away loses nothing.
type worker struct {
	o       WorkerOptions
	cfg     Config
	data    *Dataset
	scratch *Scratch
	params  []float64
	bufs    [][]float64 // per-shard gradients of the current assignment
	group   gradGroup   // gradient statistics of the current assignment
	conns   map[string]*conn
	gpu     *gpuModel
}

// RunWorker works for the coordinator o.Coordinator finds, following it
// across restarts and migrations, until training finishes (nil) or ctx
// ends (ErrStopped).
func RunWorker(ctx context.Context, o WorkerOptions) error {
	if o.Out == nil {
		o.Out = io.Discard
	}
	w := &worker{o: o, conns: map[string]*conn{}}
	if o.GPU.UsePercent > 0 {
		w.gpu = newGPUModel(o.GPU)
	}
	defer w.closeConns()
	for {
		addr, err := o.Coordinator.Coordinator(ctx)
		if err == nil {
			err = w.session(ctx, addr)
		}
		switch {
		case errors.Is(err, errFinished):
			fmt.Fprintln(o.Out, "training finished")
			return nil
		case ctx.Err() != nil:
			return ErrStopped
		}
		fmt.Fprintf(o.Out, "coordinator %s: %v; looking again\n", addr, err)
		w.closeConns()
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

func (w *worker) session(ctx context.Context, addr string) error {
	c, cfg, err := hello(ctx, addr, &message{Kind: msgHello, Role: roleWorker})
	if err != nil {
		return err
	}
	defer c.close()
	stop := context.AfterFunc(ctx, c.close)
	defer stop()
	w.configure(*cfg)
	fmt.Fprintf(w.o.Out, "joined coordinator %s %s%s\n", addr, w.cfg.ComputeLabel(), w.o.GPU.Label())
	for {
		m, err := c.recv()
		if err != nil {
			return err
		}
		switch m.Kind {
		case msgFinish:
			return errFinished
		case msgAssign:
			if err := c.send(w.work(ctx, m)); err != nil {
				return err
			}
		}
	}
}

func (w *worker) configure(cfg Config) {
	if w.o.ComputePerSample > 0 {
		cfg.ComputePerSample = w.o.ComputePerSample
	}
	if w.data == nil || cfg.Fingerprint() != w.cfg.Fingerprint() {
		w.data, w.scratch = NewDataset(cfg), NewScratch(cfg)
		w.params, w.bufs = make([]float64, ParamCount(cfg)), nil
	}
	w.cfg = cfg
}

// work computes the assigned micro-shards of one step: pull the step's
// parameters from every server, compute each shard's gradient (real
// arithmetic, plus the MODELLED compute time), then push each server its
// slices of them in one message. The Done reply carries each shard's loss,
// or the error.
func (w *worker) work(ctx context.Context, a *message) *message {
	done := &message{Kind: msgDone, Step: a.Step, Epoch: a.Epoch, Shards: a.Shards}
	err := w.pull(ctx, a)
	if err == nil {
		grads := w.grads(len(a.Shards))
		for i, s := range a.Shards {
			w.scratch.Grad = grads[i]
			done.Losses = append(done.Losses, ShardGradient(w.cfg, w.data, w.params, a.Step, s, w.scratch))
			lo, hi := w.cfg.ShardSlots(s)
			w.group.add(grads[i], hi-lo)
			modelledCompute(ctx, w.cfg, hi-lo, w.gpu)
		}
		done.Stats = &GradStats{}
		w.group.close(done.Stats)
		err = w.push(ctx, a, grads)
	}
	if err != nil {
		done.Losses, done.Stats, done.Err = nil, nil, err.Error()
		w.closeConns()
		sleepCtx(ctx, 100*time.Millisecond)
	}
	return done
}

// grads returns k gradient buffers.
func (w *worker) grads(k int) [][]float64 {
	for len(w.bufs) < k {
		w.bufs = append(w.bufs, make([]float64, len(w.params)))
	}
	return w.bufs[:k]
}

func (w *worker) pull(ctx context.Context, a *message) error {
	return w.eachServer(ctx, a.Layout, func(r Range, c *conn) error {
		p, err := c.call(&message{Kind: msgPull, Step: a.Step, Epoch: a.Epoch})
		if err == nil && (p.Lo != r.Lo || len(p.A) != r.Hi-r.Lo) {
			err = fmt.Errorf("ps %s sent [%d,%d), want [%d,%d)", r.Addr, p.Lo, p.Lo+len(p.A), r.Lo, r.Hi)
		}
		if err == nil {
			copy(w.params[r.Lo:r.Hi], p.A)
		}
		return err
	})
}

func (w *worker) push(ctx context.Context, a *message, grads [][]float64) error {
	return w.eachServer(ctx, a.Layout, func(r Range, c *conn) error {
		body := make(floats, 0, len(grads)*(r.Hi-r.Lo))
		for _, g := range grads {
			body = append(body, g[r.Lo:r.Hi]...)
		}
		_, err := c.call(&message{Kind: msgPush, Step: a.Step, Epoch: a.Epoch, Shards: a.Shards, A: body})
		return err
	})
}

// eachServer runs f for every range of the layout concurrently, over one
// cached data connection per server.
func (w *worker) eachServer(ctx context.Context, layout []Range, f func(Range, *conn) error) error {
	conns := make([]*conn, len(layout))
	for i, r := range layout {
		c := w.conns[r.Addr]
		if c == nil {
			var err error
			if c, err = dialConn(ctx, r.Addr); err != nil {
				return fmt.Errorf("ps %s: %w", r.Addr, err)
			}
			w.conns[r.Addr] = c
		}
		conns[i] = c
	}
	errs := make([]error, len(layout))
	var wg sync.WaitGroup
	for i, r := range layout {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(r, conns[i])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (w *worker) closeConns() {
	for a, c := range w.conns {
		c.close()
		delete(w.conns, a)
	}
}
