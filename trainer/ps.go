package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/caravan-nomad/caravan/driver/protocol"
)

var (
	// errFinished: the coordinator said training is over.
	errFinished = errors.New("training finished")
	// ErrStopped means a parameter server or worker was asked to stop
	// before training finished (after handing off what it held).
	ErrStopped = errors.New("stopped before training finished")
)

// leaveTimeout bounds a stopping shard server's wait for the coordinator
// to take its slice.
const leaveTimeout = 10 * time.Second

// RunShardServer serves a slice of the parameters for the coordinator that
// o.Coordinator finds, following it across restarts and migrations, until
// training finishes (nil) or ctx ends: then it hands its slice to the
// coordinator before returning ErrStopped.
func RunShardServer(ctx context.Context, o ServerOptions) error {
	if o.Out == nil {
		o.Out = io.Discard
	}
	sh := &shard{}
	go acceptLoop(o.Listener, sh.serveData)
	defer o.Listener.Close()
	fmt.Fprintf(o.Out, "serving role=ps listen=%s\n", o.advertise())
	for {
		addr, err := o.Coordinator.Coordinator(ctx)
		if err == nil {
			err = serveCoordinator(ctx, o, sh, addr)
		}
		switch {
		case errors.Is(err, errFinished):
			fmt.Fprintln(o.Out, "training finished")
			return nil
		case ctx.Err() != nil:
			return ErrStopped
		}
		fmt.Fprintf(o.Out, "coordinator %s: %v; looking again\n", addr, err)
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// serveCoordinator answers one coordinator's requests about the slice.
func serveCoordinator(ctx context.Context, o ServerOptions, sh *shard, addr string) error {
	c, cfg, err := hello(ctx, addr, &message{Kind: msgHello, Role: roleServer, Addr: o.advertise()})
	if err != nil {
		return err
	}
	defer c.close()
	fmt.Fprintf(o.Out, "joined coordinator %s\n", addr)
	msgs, errs := readAll(c)
	var leaveBy <-chan time.Time
	done := ctx.Done()
	for {
		select {
		case <-done:
			done = nil // hand off once
			if err := c.send(&message{Kind: msgLeave}); err != nil {
				return err
			}
			leaveBy = time.After(leaveTimeout)
		case <-leaveBy:
			return errors.New("coordinator did not take the slice in time")
		case err := <-errs:
			return err
		case m := <-msgs:
			switch m.Kind {
			case msgSetShard:
				sh.set(*cfg, m)
				err = c.send(&message{Kind: msgAck})
			case msgGetShard:
				err = c.send(sh.get(m.Step))
			case msgRelease:
				fmt.Fprintln(o.Out, "slice handed off")
				return ErrStopped
			case msgFinish:
				return errFinished
			}
			if err != nil {
				return err
			}
		}
	}
}

// hello opens a member's control connection and returns the job's Config.
func hello(ctx context.Context, addr string, h *message) (*conn, *Config, error) {
	c, err := dialConn(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	r, err := c.call(h)
	if err == nil && (r.Kind != msgWelcome || r.Config == nil) {
		err = fmt.Errorf("coordinator answered hello with message %d", r.Kind)
	}
	if err == nil {
		err = r.Config.Validate()
	}
	if err != nil {
		c.close()
		return nil, nil, err
	}
	return c, r.Config, nil
}

// readAll delivers c's messages until it fails.
func readAll(c *conn) (<-chan *message, <-chan error) {
	msgs, errs := make(chan *message), make(chan error, 1)
	go func() {
		for {
			m, err := c.recv()
			if err != nil {
				errs <- err
				return
			}
			msgs <- m
		}
	}()
	return msgs, errs
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// AnswerWithSkips answers checkpoint requests of a member that holds no
// state of its own (a shard server, a worker) with the driver's skip
// marker ("another member writes the state"), each with a sequence above
// the last; exit requests call stop.
func AnswerWithSkips(ctx context.Context, dir string, floor uint64, reqs <-chan Request, out io.Writer, stop func(Request)) {
	seq := floor
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-reqs:
			if r != RequestExit && dir != "" {
				seq++
				if err := writeSkip(dir, seq); err != nil {
					fmt.Fprintf(out, "skip marker: %v\n", err)
				} else {
					fmt.Fprintf(out, "checkpoint skipped sequence=%d (the coordinating ps writes the state)\n", seq)
				}
			}
			if r != RequestCheckpoint {
				stop(r)
			}
		}
	}
}

func writeSkip(dir string, seq uint64) error {
	return protocol.WriteMarker(dir, &protocol.Marker{Sequence: seq, Skip: true})
}
