package trainer

import (
	"context"
	"time"

	"github.com/caravan-nomad/caravan/driver/protocol"
)

// requestFilePoll is how often the trainer looks at the checkpoint
// sidecar's request file.
const requestFilePoll = 50 * time.Millisecond

// withRequestFile adds the checkpoint requests of a caravan sidecar to in:
// a sequence in dir's request file (protocol.RequestName) above the one
// there when the trainer started asks for a checkpoint, as the checkpoint
// signal does. A container task cannot be signalled by the sidecar (that
// needs the alloc-lifecycle ACL), so the sidecar writes this file into the
// shared allocation directory instead. With dir "" it returns in.
func withRequestFile(ctx context.Context, dir string, in <-chan Request) <-chan Request {
	if dir == "" {
		return in
	}
	out := make(chan Request, 4)
	seen := protocol.RequestSequence(dir) // one restored with the checkpoint is old
	go func() {
		t := time.NewTicker(requestFilePoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case r := <-in:
				select {
				case out <- r:
				case <-ctx.Done():
					return
				}
			case <-t.C:
				seq := protocol.RequestSequence(dir)
				if seq <= seen {
					continue
				}
				seen = seq
				select {
				case out <- RequestCheckpoint:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}
