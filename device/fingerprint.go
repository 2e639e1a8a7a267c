package device

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/caravan-nomad/caravan/device/nvml"
)

// Fingerprint advertises one device group per GPU (or MIG instance), its
// instances being the GPU's shares. It re-reads the GPUs every
// fingerprint_period and whenever health changes, and sends an update only
// when the groups differ from the last one sent.
func (p *Plugin) Fingerprint(ctx context.Context) (<-chan *device.FingerprintResponse, error) {
	s, _, _ := p.state()
	if s == nil {
		return nil, fmt.Errorf("caravan-gpu: fingerprint before SetConfig")
	}
	if !s.enabled {
		return nil, device.ErrPluginDisabled
	}
	p.startXidWatch()
	p.startMPSWatch()
	out := make(chan *device.FingerprintResponse, 1)
	go p.fingerprintLoop(ctx, s.fingerprintPeriod, out)
	return out, nil
}

func (p *Plugin) fingerprintLoop(ctx context.Context, period time.Duration, out chan<- *device.FingerprintResponse) {
	defer close(out)
	var last []*device.DeviceGroup
	sent := false
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.ctx.Done():
			return
		case <-timer.C:
		case <-p.healthCh:
		}
		// The recovery wait is counted from before the pass: a GPU that
		// recovers while the pass runs (or while its update waits to be
		// read) is re-read at once, not a fingerprint_period later.
		passStart := p.now()
		groups := p.fingerprintOnce()
		if !sent || !reflect.DeepEqual(groups, last) {
			select {
			case out <- device.NewFingerprint(groups...):
			case <-ctx.Done():
				return
			}
			last, sent = groups, true
		}
		wait := period
		_, _, health := p.state()
		if next := health.nextRecovery(passStart); !next.IsZero() {
			wait = max(min(wait, next.Sub(p.now())+10*time.Millisecond), 0)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

// fingerprintOnce reads the GPUs and returns the device groups to
// advertise. A backend error keeps the previous GPUs but marks them
// unhealthy, so Nomad stops placing work on them without losing them.
func (p *Plugin) fingerprintOnce() []*device.DeviceGroup {
	s, client, health := p.state()
	if client == nil {
		return nil
	}
	sys, err := client.System()
	var gpus []nvml.GPU
	if err == nil {
		gpus, err = client.GPUs()
	}
	inv := p.inv
	if err != nil {
		p.fpLogger.Error("reading GPUs failed", "error", err)
		for _, e := range inv.entries() {
			health.recordStatus(e.gpu.UUID, err)
		}
	} else {
		inv = buildInventory(s, sys, gpus, p.inv)
		p.mu.Lock()
		p.inv = inv
		p.mu.Unlock()
		for _, g := range gpus {
			var problem error
			if g.Problem != "" {
				problem = errors.New(g.Problem)
			}
			health.recordStatus(g.UUID, problem)
		}
		for _, e := range inv.entries() {
			if e.clampedFrom > 0 && !p.warned["clamp:"+e.gpu.UUID] {
				p.warned["clamp:"+e.gpu.UUID] = true
				p.fpLogger.Warn("share count lowered to keep shares at least 1 MiB", "field", s.shareField(e.gpu),
					"gpu", e.gpu.UUID, "memory_mib", e.gpu.MemoryBytes>>20, "configured", e.clampedFrom, "shares", e.shares)
			}
		}
		for id := range s.ignored {
			if !ignoredMatches(gpus, id) && !p.warned["ignored:"+id] {
				p.warned["ignored:"+id] = true
				p.fpLogger.Warn("ignored GPU not found on this node", "field", "ignored_gpu_ids", "uuid", id)
			}
		}
		for _, o := range s.overrides {
			if !inventoryMatches(gpus, o) && !p.warned[o.field] {
				p.warned[o.field] = true
				p.fpLogger.Warn("share override matches no GPU", "field", o.field, "gpu", o.String())
			}
		}
	}
	return p.groups(inv, health)
}

func ignoredMatches(gpus []nvml.GPU, uuid string) bool {
	for _, g := range gpus {
		if g.UUID == uuid {
			return true
		}
	}
	return false
}

func inventoryMatches(gpus []nvml.GPU, o override) bool {
	for _, g := range gpus {
		if o.matches(g) {
			return true
		}
	}
	return false
}

// groups renders inv as device groups.
func (p *Plugin) groups(inv *inventory, health *healthTracker) []*device.DeviceGroup {
	now := p.now()
	s, _, _ := p.state()
	entries := inv.entries()
	out := make([]*device.DeviceGroup, 0, len(entries))
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range entries {
		healthy, desc := health.health(now, e.gpu.UUID, e.gpu.ParentUUID)
		devs := make([]*device.Device, e.shares)
		loc := &device.DeviceLocality{PciBusID: e.gpu.PCIBusID}
		for i := range devs {
			id := e.ids[i]
			p.advertised[id] = true
			devs[i] = &device.Device{
				ID:         id,
				Healthy:    healthy,
				HealthDesc: desc,
				HwLocality: loc,
			}
		}
		out = append(out, &device.DeviceGroup{
			Vendor:     Vendor,
			Type:       DeviceType,
			Name:       e.gpu.UUID,
			Devices:    devs,
			Attributes: attributes(s, inv.system, e),
		})
	}
	return out
}

// Attribute names of every share group; jobspecs constrain on them as
// ${device.attr.<name>}.
const (
	AttrModel             = "model"
	AttrUUID              = "uuid"
	AttrIndex             = "index"
	AttrMemory            = "memory"
	AttrMemoryPerShare    = "memory_per_share"
	AttrShares            = "shares"
	AttrShareFraction     = "share_fraction"
	AttrBackend           = "backend"
	AttrSimulated         = "simulated"
	AttrDriverVersion     = "driver_version"
	AttrCUDADriverVersion = "cuda_driver_version"
	AttrComputeCapability = "compute_capability"
	AttrPCIBusID          = "pci_bus_id"
	AttrMIG               = "mig"
	AttrMIGProfile        = "mig_profile"
	AttrParentUUID        = "parent_uuid"
	AttrMPS               = "mps"
)

func attributes(s *settings, sys nvml.System, e *gpuEntry) map[string]*structs.Attribute {
	g := e.gpu
	a := map[string]*structs.Attribute{
		AttrModel:          structs.NewStringAttribute(g.Model),
		AttrUUID:           structs.NewStringAttribute(g.UUID),
		AttrIndex:          structs.NewIntAttribute(int64(g.Index), ""),
		AttrMemory:         structs.NewIntAttribute(int64(g.MemoryBytes>>20), structs.UnitMiB),
		AttrMemoryPerShare: structs.NewIntAttribute(int64(e.memoryPerShare>>20), structs.UnitMiB),
		AttrShares:         structs.NewIntAttribute(int64(e.shares), ""),
		AttrShareFraction:  structs.NewFloatAttribute(1/float64(e.shares), ""),
		AttrBackend:        structs.NewStringAttribute(sys.Backend),
		AttrSimulated:      structs.NewBoolAttribute(sys.Backend == BackendSimulated),
		AttrMIG:            structs.NewBoolAttribute(g.MIG),
		AttrMPS:            structs.NewBoolAttribute(s.mps.Enabled),
	}
	optional := map[string]string{
		AttrDriverVersion:     sys.DriverVersion,
		AttrCUDADriverVersion: sys.CUDADriverVersion,
		AttrComputeCapability: g.ComputeCapability,
		AttrPCIBusID:          g.PCIBusID,
		AttrMIGProfile:        g.MIGProfile,
		AttrParentUUID:        g.ParentUUID,
	}
	for k, v := range optional {
		if v != "" {
			a[k] = structs.NewStringAttribute(v)
		}
	}
	return a
}

// startXidWatch consumes the backend's Xid events for the plugin's life.
func (p *Plugin) startXidWatch() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client == nil || p.xidCancel != nil || !p.settings.health.enabled {
		return
	}
	ctx, cancel := context.WithCancel(p.ctx)
	events, err := p.client.WatchXid(ctx)
	if err != nil {
		cancel()
		p.healthLogger.Warn("Xid health checks unavailable", "error", err)
		return
	}
	p.xidCancel = cancel
	health := p.health
	go func() {
		for ev := range events {
			critical, changed := health.recordXid(ev)
			p.healthLogger.Info("xid event", "gpu", ev.UUID, "xid", ev.Xid, "critical", critical)
			if changed {
				select {
				case p.healthCh <- struct{}{}:
				default:
				}
			}
		}
	}()
}
