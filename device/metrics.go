package device

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caravan-nomad/caravan/device/nvml"
	"github.com/caravan-nomad/caravan/internal/metrics"
	"github.com/caravan-nomad/caravan/internal/satmath"
)

// gpuFigures are one GPU's numbers from the latest metering pass.
type gpuFigures struct {
	uuid, model                         string
	shares, reserved, active, overLimit int
	memUsed, memTotal, memUnattributed  uint64
	memReserved                         uint64
	smReserved                          uint32 // percent, summed over reservations
	util                                *uint32
}

// deviceMetrics keeps the latest pass's per-GPU figures for Prometheus, so
// share use outlives Nomad's allocation stats. Served at the plugin's
// metrics_address (off unless set).
type deviceMetrics struct {
	mu      sync.Mutex
	backend string
	gpus    []gpuFigures

	statusErrors *prometheus.CounterVec
	reg          *prometheus.Registry
}

var (
	gpuLabels          = []string{"gpu", "model"}
	descBackend        = prometheus.NewDesc("caravan_gpu_backend_info", "Always 1; backend is nvml, or simulated for fake GPUs.", []string{"backend"}, nil)
	descShares         = prometheus.NewDesc("caravan_gpu_shares", "Shares the GPU is advertised as.", gpuLabels, nil)
	descReserved       = prometheus.NewDesc("caravan_gpu_shares_reserved", "Shares of the GPU that a Reserve call handed out (Nomad never tells the plugin an allocation ended, so a share stays counted until it is reserved again; shares_active is what is in use).", gpuLabels, nil)
	descActive         = prometheus.NewDesc("caravan_gpu_shares_active", "Shares whose reservation has processes on the GPU.", gpuLabels, nil)
	descOverLimit      = prometheus.NewDesc("caravan_gpu_reservations_over_limit", "Reservations using more GPU memory than their shares allow.", gpuLabels, nil)
	descMemUsed        = prometheus.NewDesc("caravan_gpu_memory_used_bytes", "GPU memory used by all processes.", gpuLabels, nil)
	descMemTotal       = prometheus.NewDesc("caravan_gpu_memory_total_bytes", "GPU memory in total.", gpuLabels, nil)
	descMemReserved    = prometheus.NewDesc("caravan_gpu_memory_reserved_used_bytes", "GPU memory used by processes of this GPU's reservations.", gpuLabels, nil)
	descMemUnattrib    = prometheus.NewDesc("caravan_gpu_memory_unattributed_bytes", "GPU memory used by processes outside this GPU's reservations.", gpuLabels, nil)
	descSMReserved     = prometheus.NewDesc("caravan_gpu_reserved_sm_utilization_ratio", "SM utilization of the reservations' processes, 0..1 (summed, capped at 1).", gpuLabels, nil)
	descGPUUtilization = prometheus.NewDesc("caravan_gpu_utilization_ratio", "GPU utilization as NVML reports it, 0..1 (absent when NVML gives none).", gpuLabels, nil)
)

func newDeviceMetrics() *deviceMetrics {
	m := &deviceMetrics{statusErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "caravan_gpu_status_errors_total", Help: "GPU status reads that failed.",
	}, []string{"gpu"})}
	m.reg = metrics.NewRegistry(m, m.statusErrors)
	return m
}

// set replaces the figures with those of a finished pass.
func (m *deviceMetrics) set(backend string, gpus []gpuFigures) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.backend, m.gpus = backend, gpus
}

func (m *deviceMetrics) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(m, ch) }

func (m *deviceMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	backend, gpus := m.backend, m.gpus
	m.mu.Unlock()
	if backend != "" {
		ch <- prometheus.MustNewConstMetric(descBackend, prometheus.GaugeValue, 1, backend)
	}
	for _, g := range gpus {
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, g.uuid, g.model)
		}
		gauge(descShares, float64(g.shares))
		gauge(descReserved, float64(g.reserved))
		gauge(descActive, float64(g.active))
		gauge(descOverLimit, float64(g.overLimit))
		gauge(descMemUsed, float64(g.memUsed))
		gauge(descMemTotal, float64(g.memTotal))
		gauge(descMemReserved, float64(g.memReserved))
		gauge(descMemUnattrib, float64(g.memUnattributed))
		gauge(descSMReserved, float64(min(g.smReserved, 100))/100)
		if g.util != nil {
			gauge(descGPUUtilization, float64(*g.util)/100)
		}
	}
}

// figures sums one GPU's pass: share counts from the reservations, use
// from the attributed processes.
func (p *Plugin) figures(e *gpuEntry, st nvml.Status, byShare map[string]*usage, unattributed uint64) gpuFigures {
	f := gpuFigures{uuid: e.gpu.UUID, model: e.gpu.Model, shares: len(e.ids), memUsed: st.MemoryUsedBytes,
		memTotal: st.MemoryTotalBytes, memUnattributed: unattributed, util: st.GPUUtilPercent}
	seen := map[*usage]bool{}
	for _, id := range e.ids {
		if p.reservations.forShare(id) != nil {
			f.reserved++
		}
		u := byShare[id]
		if u == nil {
			continue
		}
		f.active++
		if seen[u] {
			continue
		}
		seen[u] = true
		f.memReserved = satmath.Add(f.memReserved, u.memoryBytes)
		f.smReserved = satmath.Add32(f.smReserved, u.smPercent)
		if u.memoryBytes > satmath.Mul(uint64(max(len(u.shares), 1)), e.memoryPerShare) {
			f.overLimit++
		}
	}
	return f
}

// serveMetricsLocked serves the plugin's metrics at addr ("" stops
// serving); a changed address restarts the server. p.mu must be held.
func (p *Plugin) serveMetricsLocked(addr string) error {
	if p.metricsServer != nil {
		if p.metricsAddr == addr {
			return nil
		}
		_ = p.metricsServer.Close()
		p.metricsServer, p.metricsAddr = nil, ""
	}
	if addr == "" {
		return nil
	}
	srv, err := metrics.Serve(addr, p.metrics.reg, p.logger.Named("metrics"))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	p.metricsServer, p.metricsAddr = srv, addr
	return nil
}
