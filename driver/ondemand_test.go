package driver

import (
	"context"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/driver/protocol"
)

// TestOnDemandWaitsForRecoveredCommit: an on-demand request arriving while
// RecoverTask's commit (which asks the task nothing) holds the slot is run
// after it, not folded into it and lost; a request during a checkpoint that
// does signal the task is still folded.
func TestOnDemandWaitsForRecoveredCommit(t *testing.T) {
	for _, recovering := range []bool{true, false} {
		t.Run(map[bool]string{true: "recovered commit in flight", false: "checkpoint in flight"}[recovering], func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t, t.TempDir())
			c := memberCheckpointer(t, st, "alloc-a")
			var signals atomic.Int32
			c.sig = syscall.SIGUSR1
			c.exited = make(chan struct{})
			c.signal = func(os.Signal) error {
				n := signals.Add(1)
				return protocol.WriteMarker(c.dir, &protocol.Marker{Sequence: uint64(n), Step: u64(uint64(n) * 10)})
			}
			must.True(t, c.acquire(ctx))
			c.recovering.Store(recovering)
			c.onDemand(ctx)
			c.release()
			c.recovering.Store(false)
			if !recovering {
				// Folded: onDemand started nothing, so the slot is free.
				must.True(t, c.tryAcquire())
				c.release()
				must.Eq(t, int32(0), signals.Load(), must.Sprint("folded into the checkpoint in flight"))
				return
			}
			must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool { return c.lastGen.Load() == 1 }),
				wait.Timeout(10*time.Second), wait.Gap(10*time.Millisecond)))
			must.Eq(t, int32(1), signals.Load())
		})
	}
}
