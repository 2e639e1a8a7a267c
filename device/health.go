package device

import (
	"fmt"
	"sync"
	"time"

	"github.com/caravan-nomad/caravan/device/nvml"
)

// healthPolicy decides which Xids make a GPU unhealthy and for how long.
type healthPolicy struct {
	enabled bool
	// ignored Xids never affect health; if critical is non-empty only its
	// Xids do, otherwise every Xid not ignored does.
	ignored  map[uint64]bool
	critical map[uint64]bool
	// recovery is how long a GPU must go without a critical Xid before it
	// is healthy again.
	recovery time.Duration
}

func (h healthPolicy) isCritical(xid uint64) bool {
	if !h.enabled || h.ignored[xid] {
		return false
	}
	if len(h.critical) > 0 {
		return h.critical[xid]
	}
	return true
}

// healthTracker holds the health of each GPU (or MIG instance) by UUID.
type healthTracker struct {
	policy healthPolicy

	mu     sync.Mutex
	states map[string]*gpuHealth
}

type gpuHealth struct {
	lastXid     uint64
	lastXidTime time.Time
	statusErr   string
	// The last MPS server fault on the GPU.
	mpsReason string
	mpsTime   time.Time
}

func newHealthTracker(p healthPolicy) *healthTracker {
	return &healthTracker{policy: p, states: map[string]*gpuHealth{}}
}

func (h *healthTracker) state(uuid string) *gpuHealth {
	s, ok := h.states[uuid]
	if !ok {
		s = &gpuHealth{}
		h.states[uuid] = s
	}
	return s
}

// recordXid applies an Xid event and reports whether health changed.
func (h *healthTracker) recordXid(ev nvml.XidEvent) (critical, changed bool) {
	if !h.policy.isCritical(ev.Xid) {
		return false, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.state(ev.UUID)
	was := s.xidActive(ev.Time, h.policy.recovery)
	s.lastXid, s.lastXidTime = ev.Xid, ev.Time
	return true, !was
}

func (s *gpuHealth) xidActive(now time.Time, recovery time.Duration) bool {
	return !s.lastXidTime.IsZero() && now.Sub(s.lastXidTime) < recovery
}

// recordMPSFault applies an MPS server fault to its GPU, or to every GPU in
// all when it names none, and reports whether health changed.
func (h *healthTracker) recordMPSFault(f nvml.MPSFault, all []string) bool {
	if !h.policy.enabled {
		return false
	}
	uuids := all
	if f.UUID != "" {
		uuids = []string{f.UUID}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	changed := false
	for _, id := range uuids {
		s := h.state(id)
		if !s.mpsActive(f.Time, h.policy.recovery) {
			changed = true
		}
		s.mpsReason, s.mpsTime = f.Reason, f.Time
	}
	return changed
}

func (s *gpuHealth) mpsActive(now time.Time, recovery time.Duration) bool {
	return !s.mpsTime.IsZero() && now.Sub(s.mpsTime) < recovery
}

// recordStatus notes whether the last NVML status query of uuid worked and
// reports whether health changed.
func (h *healthTracker) recordStatus(uuid string, err error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.state(uuid)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	changed := (s.statusErr == "") != (msg == "")
	s.statusErr = msg
	return changed
}

// health returns whether uuid (and, for a MIG instance, its parent) is
// healthy at now, with a description when it is not.
func (h *healthTracker) health(now time.Time, uuid, parent string) (bool, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range []string{uuid, parent} {
		if id == "" {
			continue
		}
		s, ok := h.states[id]
		if !ok {
			continue
		}
		if s.statusErr != "" {
			return false, "NVML query failed: " + s.statusErr
		}
		if s.xidActive(now, h.policy.recovery) {
			return false, fmt.Sprintf("Xid %d on %s at %s; healthy again after %s without critical Xids",
				s.lastXid, id, s.lastXidTime.UTC().Format(time.RFC3339), h.policy.recovery)
		}
		if s.mpsActive(now, h.policy.recovery) {
			return false, fmt.Sprintf("MPS server fault on %s at %s (%s); healthy again after %s without MPS faults",
				id, s.mpsTime.UTC().Format(time.RFC3339), s.mpsReason, h.policy.recovery)
		}
	}
	return true, ""
}

// nextRecovery is the earliest time after now at which a GPU unhealthy by
// an Xid or an MPS fault recovers, or zero if none is pending.
func (h *healthTracker) nextRecovery(now time.Time) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	var next time.Time
	for _, s := range h.states {
		for _, at := range []time.Time{s.lastXidTime, s.mpsTime} {
			if at.IsZero() || now.Sub(at) >= h.policy.recovery {
				continue
			}
			t := at.Add(h.policy.recovery)
			if next.IsZero() || t.Before(next) {
				next = t
			}
		}
	}
	return next
}
