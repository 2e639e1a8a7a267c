package driver

import (
	"context"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
)

// leaseHolder keeps one allocation's writer lease of a key renewed until it
// is stopped (the file stays, for a poststop task to take over) or released
// (the file goes).
type leaseHolder struct {
	leases keyLeases
	alloc  string
	node   string
	logger hclog.Logger

	mu    sync.Mutex
	state string

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// holdLease writes alloc's lease in state and renews it every leaseRenew
// until stopped or ctx (the plugin's) is done: a lease of a plugin that
// died ages out.
func holdLease(ctx context.Context, l keyLeases, alloc, node, state string, logger hclog.Logger) *leaseHolder {
	h := &leaseHolder{leases: l, alloc: alloc, node: node, logger: logger, state: state,
		stop: make(chan struct{}), done: make(chan struct{})}
	h.renew()
	go h.loop(ctx)
	return h
}

func (h *leaseHolder) loop(ctx context.Context) {
	defer close(h.done)
	t := time.NewTicker(leaseRenew)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			h.renew()
		}
	}
}

func (h *leaseHolder) renew() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.leases.put(h.alloc, h.node, h.state); err != nil {
		h.logger.Warn("cannot renew the checkpoint writer lease", "key", h.leases.key.String(), "error", err)
	}
}

// set changes the lease's state and writes it at once.
func (h *leaseHolder) set(state string) {
	h.mu.Lock()
	h.state = state
	h.mu.Unlock()
	h.renew()
}

// halt stops renewing; the lease file stays (it ages out after leaseTTL).
func (h *leaseHolder) halt() {
	h.stopOnce.Do(func() { close(h.stop) })
	<-h.done
}

// release stops renewing and deletes the lease.
func (h *leaseHolder) release() {
	h.halt()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.leases.drop(h.alloc); err != nil {
		h.logger.Warn("cannot delete the checkpoint writer lease", "key", h.leases.key.String(), "error", err)
	}
}
