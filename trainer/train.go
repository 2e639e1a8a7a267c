package trainer

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Request is something asked of a running training loop between two steps.
type Request int

const (
	// RequestCheckpoint writes a checkpoint and keeps training.
	RequestCheckpoint Request = iota + 1
	// RequestCheckpointAndExit writes a checkpoint and stops (SIGTERM-style).
	RequestCheckpointAndExit
	// RequestExit stops without a checkpoint.
	RequestExit
)

// Options are the run-time inputs of Run.
type Options struct {
	// Dir is the checkpoint directory ("" disables checkpoints).
	Dir string
	// MinSequence is a floor for the next marker sequence (the driver's
	// CARAVAN_CHECKPOINT_SEQUENCE), in case the directory was emptied.
	MinSequence uint64
	// Requests delivers checkpoint/exit requests (e.g. from signals).
	Requests <-chan Request
	// Out receives human-readable progress lines.
	Out io.Writer
	// Reporter receives progress every LogEvery steps (nil: none).
	Reporter Reporter
	// Identity fills the job/alloc/task fields of progress reports.
	Identity Progress
	// Hold keeps Run waiting for requests after the last step instead of
	// returning (for service jobs); an exit request ends it.
	Hold bool
	// AfterStep, if set, is called after every step with the number of
	// steps completed (tests use it to inject requests at exact steps).
	AfterStep func(step uint64)
	// GPU is the job's MODELLED GPU profile: the modelled compute slows
	// down when its simulated GPU is shared and scales with its shares
	// (zero: no profile, the plain ComputePerSample).
	GPU GPUProfile

	// gpu replaces the model built from GPU (tests).
	gpu *gpuModel
}

// Result is the outcome of Run.
type Result struct {
	StartStep   uint64 // step the run resumed from (0 when fresh)
	Step        uint64 // steps completed at the end
	Loss        float64
	Accuracy    float64
	Hash        string // SHA-256 of the final parameters
	Interrupted bool   // stopped before c.Steps
	Checkpoints int    // checkpoints written by this run
}

// Run trains c from the checkpoint in o.Dir (if any) until c.Steps, a
// RequestExit/RequestCheckpointAndExit, or ctx is done.
func Run(ctx context.Context, c Config, o Options) (*Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	t := &trainRun{c: c, o: o, data: NewDataset(c), model: NewModel(c), res: &Result{}, seq: o.MinSequence}
	if err := t.resume(); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Out, "training %s %s%s start_step=%d\n", c, c.ComputeLabel(), o.GPU.Label(), t.res.StartStep)
	t.gpu = o.gpu
	if t.gpu == nil && o.GPU.UsePercent > 0 {
		t.gpu = newGPUModel(o.GPU)
	}

	if o.Reporter != nil {
		t.rep = newAsyncReporter(ctx, o.Reporter, func(err error) {
			fmt.Fprintf(o.Out, "progress report failed: %v\n", err)
		})
		defer t.rep.Close()
	}

	var delay *time.Timer
	if c.StepDelay > 0 {
		delay = time.NewTimer(c.StepDelay)
		defer delay.Stop()
	}
	step, err := t.train(ctx, delay)
	if err != nil {
		return nil, err
	}
	return t.finish(ctx, step)
}

// trainRun is one Run: its model and data, the result so far, the last
// checkpoint sequence and the current logging window.
type trainRun struct {
	c     Config
	o     Options
	data  *Dataset
	model *Model
	res   *Result
	seq   uint64
	gpu   *gpuModel
	rep   *asyncReporter

	windowStart time.Time
	windowSteps uint64
	windowLoss  float64
}

// resume loads the checkpoint in o.Dir, if there is one, into the model.
func (t *trainRun) resume() error {
	c, o, model := t.c, t.o, t.model
	if o.Dir == "" {
		return nil
	}
	st, err := LoadCheckpoint(c, o.Dir)
	if err != nil {
		return fmt.Errorf("resume from %s: %w", o.Dir, err)
	}
	if st == nil {
		return nil
	}
	if len(st.Params) != len(model.Params) {
		return fmt.Errorf("resume from %s: %w", o.Dir, ErrFingerprint)
	}
	copy(model.Params, st.Params)
	copy(model.Velocity, st.Velocity)
	t.res.StartStep = st.Step
	t.seq = max(t.seq, st.Sequence)
	fmt.Fprintf(o.Out, "resumed step=%d sequence=%d params_sha256=%s\n", st.Step, st.Sequence, model.Hash())
	return nil
}

// checkpoint writes the model at step to o.Dir (or says it cannot).
func (t *trainRun) checkpoint(step uint64) error {
	o := t.o
	if o.Dir == "" {
		fmt.Fprintln(o.Out, "checkpoint requested but no checkpoint directory is set; ignoring")
		return nil
	}
	t.seq++
	start := time.Now()
	st := &State{Step: step, Params: t.model.Params, Velocity: t.model.Velocity}
	if err := SaveCheckpoint(t.c, o.Dir, st, t.seq, t.model.Hash()); err != nil {
		return fmt.Errorf("checkpoint at step %d: %w", step, err)
	}
	t.res.Checkpoints++
	fmt.Fprintf(o.Out, "checkpoint step=%d sequence=%d duration=%s\n", step, t.seq, time.Since(start).Round(time.Microsecond))
	return nil
}

// train runs steps until c.Steps, an exit request or ctx is done, serving
// requests between steps, and returns the steps completed. delay, when
// set, paces the steps.
func (t *trainRun) train(ctx context.Context, delay *time.Timer) (uint64, error) {
	c, o := t.c, t.o
	step := t.res.StartStep
	t.windowStart, t.windowSteps, t.windowLoss = time.Now(), uint64(0), 0.0
	var pending Request
	for step < c.Steps {
		// Serve requests between steps, so a checkpoint is always a
		// consistent (step, params, velocity) triple.
		if pending == 0 {
			select {
			case <-ctx.Done():
				t.res.Interrupted = true
				return step, nil
			case pending = <-o.Requests:
			default:
			}
		}
		if pending != 0 {
			r := pending
			pending = 0
			if stop, err := t.serve(r, step); err != nil || stop {
				return step, err
			}
			continue
		}

		t.windowLoss += t.model.Step(c, t.data, step)
		modelledCompute(ctx, c, c.Batch, t.gpu)
		step++
		t.windowSteps++
		if o.AfterStep != nil {
			o.AfterStep(step)
		}

		if c.LogEvery > 0 && (step%c.LogEvery == 0 || step == c.Steps) {
			t.logWindow(step)
		}
		if delay != nil && step < c.Steps {
			select {
			case <-delay.C:
			case <-ctx.Done():
			case pending = <-o.Requests:
			}
			delay.Reset(c.StepDelay)
		}
	}
	return step, nil
}

// serve answers request r between steps; true means stop training.
func (t *trainRun) serve(r Request, step uint64) (bool, error) {
	switch r {
	case RequestCheckpoint:
		if err := t.checkpoint(step); err != nil {
			return false, err
		}
	case RequestCheckpointAndExit:
		if err := t.checkpoint(step); err != nil {
			return false, err
		}
		t.res.Interrupted = true
		return true, nil
	case RequestExit:
		t.res.Interrupted = true
		return true, nil
	}
	return false, nil
}

// logWindow prints and reports the logging window that ends at step, and
// starts the next one.
func (t *trainRun) logWindow(step uint64) {
	c, o, model := t.c, t.o, t.model
	elapsed := time.Since(t.windowStart).Seconds()
	sps := float64(t.windowSteps) * float64(c.Batch) / max(elapsed, 1e-9)
	loss := t.windowLoss / float64(t.windowSteps)
	sqr, gvar, ok := model.Stats.Estimate(c.Batch)
	fmt.Fprintf(o.Out, "step=%d loss=%.6f samples_per_sec=%.0f%s\n", step, loss, sps, gradFields(sqr, gvar, ok))
	if t.rep != nil {
		p := o.Identity
		p.Step, p.StepsTotal, p.Loss, p.SamplesPerSec, p.BatchSize, p.Time = step, c.Steps, loss, sps, c.Batch, time.Now()
		p.StepsPerSec = float64(t.windowSteps) / max(elapsed, 1e-9)
		p.GradSqr, p.GradVar = sqr, gvar
		p.Checkpointed, p.Done = t.res.Checkpoints > 0, step == c.Steps
		t.rep.Report(p)
	}
	t.windowStart, t.windowSteps, t.windowLoss = time.Now(), 0, 0
	model.Stats = GradStats{}
}

// finish records the result at step, evaluates a completed run and, with
// o.Hold, waits to be stopped while still answering checkpoint requests.
func (t *trainRun) finish(ctx context.Context, step uint64) (*Result, error) {
	o, res := t.o, t.res
	res.Step = step
	res.Hash = t.model.Hash()
	if res.Interrupted {
		// Stop fast: a full-dataset evaluation would delay the suspend.
		fmt.Fprintf(o.Out, "interrupted step=%d params_sha256=%s\n", step, res.Hash)
		return res, nil
	}
	res.Loss, res.Accuracy = t.model.Loss(t.data)
	fmt.Fprintf(o.Out, "final step=%d loss=%.6f accuracy=%.4f params_sha256=%s\n", step, res.Loss, res.Accuracy, res.Hash)
	if o.Hold && !res.Interrupted {
		// Keep running (for service jobs, which Nomad would otherwise
		// restart), still answering checkpoint requests so a stop saves the
		// finished state.
		fmt.Fprintln(o.Out, "holding: training finished; waiting to be stopped")
		for {
			select {
			case <-ctx.Done():
				return res, nil
			case r := <-o.Requests:
				if r == RequestCheckpoint || r == RequestCheckpointAndExit {
					if err := t.checkpoint(step); err != nil {
						return nil, err
					}
				}
				if r != RequestCheckpoint {
					res.Interrupted = true
					return res, nil
				}
			}
		}
	}
	return res, nil
}
