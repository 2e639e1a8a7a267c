package device

import (
	"context"
	"time"

	"github.com/caravan-nomad/caravan/device/nvml"
)

// mpsLogPoll is how often the MPS log watcher reads the logs.
const mpsLogPoll = time.Second

// mpsWatcher is where MPS faults come from: the backend itself when it
// knows them (the simulated backend's fault file), else the MPS log
// directory.
func mpsWatcher(s *settings, client nvml.Client) nvml.MPSWatcher {
	if w, ok := client.(nvml.MPSWatcher); ok {
		return w
	}
	return &mpsLogWatcher{dir: s.mps.LogDir, poll: mpsLogPoll}
}

// startMPSWatch consumes MPS server faults for the plugin's life, when MPS
// and health checks are on: a fault marks its GPU (or every GPU, when it
// names none) unhealthy for the health recovery_period, so Nomad stops
// placing work there while the server recovers.
func (p *Plugin) startMPSWatch() {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.settings
	if p.client == nil || p.mpsCancel != nil || !s.health.enabled || !s.mps.Enabled {
		return
	}
	ctx, cancel := context.WithCancel(p.ctx)
	faults, err := mpsWatcher(s, p.client).WatchMPS(ctx)
	if err != nil {
		cancel()
		p.healthLogger.Info("MPS health checks unavailable", "error", err)
		return
	}
	p.mpsCancel = cancel
	health := p.health
	go func() {
		for f := range faults {
			changed := health.recordMPSFault(f, p.gpuUUIDs())
			p.healthLogger.Warn("MPS server fault", "gpu", f.UUID, "reason", f.Reason)
			if changed {
				select {
				case p.healthCh <- struct{}{}:
				default:
				}
			}
		}
	}()
}

// gpuUUIDs lists the GPUs (and MIG instances) of the current inventory.
func (p *Plugin) gpuUUIDs() []string {
	p.mu.RLock()
	inv := p.inv
	p.mu.RUnlock()
	var out []string
	for _, e := range inv.entries() {
		out = append(out, e.gpu.UUID)
	}
	return out
}
