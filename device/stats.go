package device

import (
	"context"
	"time"

	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/caravan-nomad/caravan/device/nvml"
	"github.com/caravan-nomad/caravan/internal/satmath"
)

// Stats attribute names of every share instance.
const (
	StatMemoryUsed        = "memory_used"
	StatMemoryLimit       = "memory_limit"
	StatMemoryPeak        = "memory_peak"
	StatSMUtilization     = "sm_utilization"
	StatOverLimit         = "over_limit"
	StatProcesses         = "processes"
	StatReservation       = "reservation"
	StatReservationShares = "reservation_shares"
	// StatGPU names the nested object of GPU-wide values.
	StatGPU                    = "gpu"
	StatGPUUtilization         = "gpu_utilization"
	StatGPUMemoryUsed          = "gpu_memory_used"
	StatGPUMemoryUnattributed  = "gpu_memory_unattributed"
	StatGPUPower               = "gpu_power"
	StatGPUTemperature         = "gpu_temperature"
	StatGPUECCErrors           = "gpu_ecc_errors_uncorrected"
	StatGPUError               = "gpu_error"
	statusErrorSummaryFragment = "GPU unavailable: "
)

// Stats reports, every interval, per share instance: the owning
// reservation's GPU memory used against its limit, its SM utilisation, an
// over-limit flag, and the GPU's own utilisation, memory, power,
// temperature and ECC counters.
func (p *Plugin) Stats(ctx context.Context, interval time.Duration) (<-chan *device.StatsResponse, error) {
	out := make(chan *device.StatsResponse, 1)
	go func() {
		defer close(out)
		timer := time.NewTimer(0)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-p.ctx.Done():
				return
			case <-timer.C:
				timer.Reset(interval)
			}
			resp := p.collectStats()
			select {
			case out <- resp:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// collectStats is one metering pass. NVML calls: a fixed number per GPU;
// procfs reads: one per PID not seen in the previous pass.
func (p *Plugin) collectStats() *device.StatsResponse {
	_, client, health := p.state()
	p.mu.RLock()
	inv, m := p.inv, p.meter
	p.mu.RUnlock()
	if client == nil || m == nil {
		return &device.StatsResponse{}
	}
	now := p.now()
	entries := inv.entries()
	groups := make([]*device.DeviceGroupStats, 0, len(entries))
	healthChanged := false
	figures := make([]gpuFigures, 0, len(entries))
	m.begin()
	for _, e := range entries {
		st, err := client.Status(e.gpu.UUID, m.since(e.gpu.UUID))
		if health.recordStatus(e.gpu.UUID, err) {
			healthChanged = true
		}
		g := &device.DeviceGroupStats{
			Vendor:        Vendor,
			Type:          DeviceType,
			Name:          e.gpu.UUID,
			InstanceStats: make(map[string]*device.DeviceStats, e.shares),
		}
		if err != nil {
			p.statsLogger.Warn("reading GPU status failed", "gpu", e.gpu.UUID, "error", err)
			p.metrics.statusErrors.WithLabelValues(e.gpu.UUID).Inc()
			es := errorStats(err, now)
			for _, id := range e.ids {
				g.InstanceStats[id] = es
			}
			groups = append(groups, g)
			continue
		}
		m.setSince(e.gpu.UUID, st.LastSampleMicros)
		byShare, unattributed := p.attribute(m, e, st)
		gpuStats := gpuStatValues(st, unattributed)
		figures = append(figures, p.figures(e, st, byShare, unattributed))
		p.renderShares(g, m, e, byShare, gpuStats, now)
		groups = append(groups, g)
	}
	m.end()
	m.forgetPeaks(p.reservations.known)
	settings, _, _ := p.state()
	p.metrics.set(settings.backend, figures)
	if healthChanged {
		select {
		case p.healthCh <- struct{}{}:
		default:
		}
	}
	return &device.StatsResponse{Groups: groups}
}

// renderShares fills g's instance stats for every share of GPU e. Shares of
// one reservation report the same values, as do free shares: render each
// once (allocations grow with reservations, not shares).
func (p *Plugin) renderShares(g *device.DeviceGroupStats, m *meter, e *gpuEntry, byShare map[string]*usage, gpuStats *structs.StatObject, now time.Time) {
	var free *device.DeviceStats
	rendered := map[*usage]*device.DeviceStats{}
	idle := map[*reservation]*usage{}
	for _, id := range e.ids {
		u := byShare[id]
		if u == nil {
			if r := p.reservations.forShare(id); r != nil {
				if u = idle[r]; u == nil {
					u = &usage{token: r.token, shares: sharesOn(r.shares, e.gpu.UUID), peakBytes: m.peak(r.token, e.gpu.UUID)}
					idle[r] = u
				}
			}
		}
		if u == nil {
			if free == nil {
				free = shareStats(e, nil, gpuStats, now)
			}
			g.InstanceStats[id] = free
			continue
		}
		ds, ok := rendered[u]
		if !ok {
			ds = shareStats(e, u, gpuStats, now)
			rendered[u] = ds
		}
		g.InstanceStats[id] = ds
	}
}

// attribute sums each reservation's processes on GPU e and maps every share
// of those reservations to its usage. Memory of processes that no
// reservation of this GPU owns is returned as unattributed.
func (p *Plugin) attribute(m *meter, e *gpuEntry, st nvml.Status) (map[string]*usage, uint64) {
	var byToken map[string]*usage
	var unattributed uint64
	for _, proc := range st.Processes {
		o := m.ownerOf(proc.PID)
		var shares []string
		if o != nil {
			shares = o.shares[e.gpu.UUID]
		}
		if len(shares) == 0 {
			unattributed = satmath.Add(unattributed, proc.UsedMemoryBytes)
			continue
		}
		if byToken == nil {
			byToken = map[string]*usage{}
		}
		u, ok := byToken[o.token]
		if !ok {
			u = &usage{token: o.token, shares: shares}
			byToken[o.token] = u
		}
		u.memoryBytes = satmath.Add(u.memoryBytes, proc.UsedMemoryBytes)
		u.peakSample = satmath.Add(u.peakSample, max(proc.PeakMemoryBytes, proc.UsedMemoryBytes))
		u.smPercent = satmath.Add32(u.smPercent, proc.SMUtilPercent)
		u.processes++
	}
	if len(byToken) == 0 {
		return nil, unattributed
	}
	byShare := make(map[string]*usage, len(byToken)*2)
	for _, u := range byToken {
		u.peakBytes = m.raisePeak(u.token, e.gpu.UUID, max(u.memoryBytes, u.peakSample))
		for _, id := range u.shares {
			byShare[id] = u
		}
	}
	return byShare, unattributed
}

func sharesOn(ids []string, uuid string) []string {
	var out []string
	for _, id := range ids {
		if u, _, ok := parseShareID(id); ok && u == uuid {
			out = append(out, id)
		}
	}
	return out
}

// gpuStatValues are the GPU-wide values, one object per GPU nested as
// "gpu" in each of its shares' stats.
func gpuStatValues(st nvml.Status, unattributed uint64) *structs.StatObject {
	v := map[string]*structs.StatValue{
		StatGPUMemoryUsed: {
			IntNumeratorVal:   i64(int64(st.MemoryUsedBytes >> 20)),
			IntDenominatorVal: i64(int64(st.MemoryTotalBytes >> 20)),
			Unit:              structs.UnitMiB,
			Desc:              "GPU memory used by all processes",
		},
		StatGPUMemoryUnattributed: {
			IntNumeratorVal: i64(int64(unattributed >> 20)),
			Unit:            structs.UnitMiB,
			Desc:            "GPU memory used by processes outside this GPU's reservations",
		},
	}
	if st.GPUUtilPercent != nil {
		v[StatGPUUtilization] = &structs.StatValue{IntNumeratorVal: i64(int64(*st.GPUUtilPercent)), Unit: "%", Desc: "GPU utilization"}
	}
	if st.PowerMilliwatts != nil {
		v[StatGPUPower] = &structs.StatValue{IntNumeratorVal: i64(int64(*st.PowerMilliwatts / 1000)), Unit: "W", Desc: "GPU power draw"}
	}
	if st.TemperatureCelsius != nil {
		v[StatGPUTemperature] = &structs.StatValue{IntNumeratorVal: i64(int64(*st.TemperatureCelsius)), Unit: "C", Desc: "GPU temperature"}
	}
	if st.ECCUncorrected != nil {
		v[StatGPUECCErrors] = &structs.StatValue{IntNumeratorVal: i64(int64(*st.ECCUncorrected)), Desc: "volatile uncorrected ECC errors"}
	}
	return &structs.StatObject{Attributes: v}
}

// shareStats renders one share instance. u is the reservation holding the
// share (nil when free); its usage is the reservation's on this GPU.
func shareStats(e *gpuEntry, u *usage, gpu *structs.StatObject, now time.Time) *device.DeviceStats {
	perShare := int64(e.memoryPerShare >> 20)
	attrs := make(map[string]*structs.StatValue, 8)
	var used, limit, peak int64
	var sm int64
	over := false
	procs := int64(0)
	if u != nil {
		k := max(len(u.shares), 1)
		limit = int64(k) * perShare
		used = int64(u.memoryBytes >> 20)
		peak = int64(u.peakBytes >> 20)
		sm = int64(min(u.smPercent, 100))
		over = u.memoryBytes > satmath.Mul(uint64(k), e.memoryPerShare)
		procs = int64(u.processes)
		attrs[StatReservation] = &structs.StatValue{StringVal: &u.token, Desc: "reservation token (CARAVAN_GPU_RESERVATION)"}
		attrs[StatReservationShares] = &structs.StatValue{IntNumeratorVal: i64(int64(k)), Desc: "shares of this GPU held by the reservation"}
	} else {
		limit = perShare
	}
	attrs[StatMemoryUsed] = &structs.StatValue{IntNumeratorVal: &used, IntDenominatorVal: &limit, Unit: structs.UnitMiB, Desc: "GPU memory used by the reservation holding this share / its limit"}
	attrs[StatMemoryPeak] = &structs.StatValue{IntNumeratorVal: &peak, IntDenominatorVal: &limit, Unit: structs.UnitMiB,
		Desc: "highest GPU memory the reservation was seen using since it started (the most of each stats pass, and of the processes' own peaks where the backend reports them) / its limit"}
	attrs[StatMemoryLimit] = &structs.StatValue{IntNumeratorVal: &limit, Unit: structs.UnitMiB, Desc: "GPU memory limit of the reservation holding this share"}
	attrs[StatSMUtilization] = &structs.StatValue{IntNumeratorVal: &sm, Unit: "%", Desc: "SM utilization of the reservation's processes"}
	attrs[StatOverLimit] = &structs.StatValue{BoolVal: &over, Desc: "reservation uses more GPU memory than its shares allow"}
	attrs[StatProcesses] = &structs.StatValue{IntNumeratorVal: &procs, Desc: "GPU processes of the reservation"}
	return &device.DeviceStats{
		Summary:   attrs[StatMemoryUsed],
		Stats:     &structs.StatObject{Attributes: attrs, Nested: map[string]*structs.StatObject{StatGPU: gpu}},
		Timestamp: now,
	}
}

func errorStats(err error, now time.Time) *device.DeviceStats {
	msg := statusErrorSummaryFragment + err.Error()
	v := &structs.StatValue{StringVal: &msg, Desc: "GPU status"}
	return &device.DeviceStats{
		Summary:   v,
		Stats:     &structs.StatObject{Attributes: map[string]*structs.StatValue{StatGPUError: v}},
		Timestamp: now,
	}
}

func i64(v int64) *int64 { return &v }
