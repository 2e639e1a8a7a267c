package trainer

import (
	"context"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

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
