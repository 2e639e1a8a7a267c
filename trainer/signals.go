package trainer

import (
	"context"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// checkpointRequests are a task's checkpoint and exit requests: its
// signals (signalRequests) and, with a checkpoint directory, the caravan
// sidecar's request file there (withRequestFile). Every trainer mode (the
// single process, a parameter server, a worker) takes its requests from
// here, so each honours a container sidecar's on-demand checkpoints.
func checkpointRequests(ctx context.Context, ckptSig syscall.Signal, dir string) (<-chan Request, *atomic.Int32) {
	reqs, exitSig := signalRequests(ctx, ckptSig)
	return withRequestFile(ctx, dir, reqs), exitSig
}

// signalRequests turns signals into requests; exitSig records the signal
// of an exit request.
func signalRequests(ctx context.Context, ckptSig syscall.Signal) (<-chan Request, *atomic.Int32) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, ckptSig, syscall.SIGTERM, syscall.SIGINT)
	requests := make(chan Request, 4)
	exitSig := &atomic.Int32{}
	go func() {
		defer signal.Stop(sigs)
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-sigs:
				r := RequestExit
				switch {
				case s == ckptSig && (s == syscall.SIGTERM || s == syscall.SIGINT):
					r = RequestCheckpointAndExit
				case s == ckptSig:
					r = RequestCheckpoint
				}
				if r != RequestCheckpoint {
					exitSig.Store(int32(s.(syscall.Signal)))
				}
				requests <- r
			}
		}
	}()
	return requests, exitSig
}
