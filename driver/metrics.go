package driver

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/internal/metrics"
)

// Checkpoint outcomes (the outcome label of the driver's counters).
const (
	outcomeSaved   = "saved"
	outcomeSkipped = "skipped"
	outcomeStale   = "stale"
	outcomeFailed  = "failed"

	outcomeRestored   = "restored"
	outcomeFresh      = "fresh"
	outcomeFellBack   = "fell_back"
	outcomeStartFresh = "failed_started_fresh"
)

// driverMetrics are the figures the driver's checkpoint events carry, kept
// as Prometheus metrics so they outlive Nomad's last 10 task events. They
// are served at the plugin's metrics_address (off unless set).
type driverMetrics struct {
	commits        *prometheus.CounterVec
	commitSeconds  *prometheus.HistogramVec
	taskSeconds    *prometheus.HistogramVec
	commitBytes    prometheus.Histogram
	newBytes       prometheus.Counter
	restores       *prometheus.CounterVec
	restoreSeconds prometheus.Histogram
	restoreBytes   prometheus.Histogram
	reg            *prometheus.Registry
}

// checkpointBuckets span a small state file to a large model on a shared
// mount, in seconds.
var checkpointBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// sizeBuckets are checkpoint sizes from 1 KiB to 64 GiB (x4 steps).
var sizeBuckets = prometheus.ExponentialBuckets(1024, 4, 13)

func newDriverMetrics() *driverMetrics {
	m := &driverMetrics{
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "caravan_driver_checkpoints_total",
			Help: "Checkpoint requests by reason (stop, periodic, signal, exit) and outcome (saved, skipped, stale, failed).",
		}, []string{"reason", "outcome"}),
		commitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "caravan_driver_checkpoint_commit_duration_seconds", Buckets: checkpointBuckets,
			Help: "Time to commit a checkpoint to the store, by reason.",
		}, []string{"reason"}),
		taskSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "caravan_driver_checkpoint_task_duration_seconds", Buckets: checkpointBuckets,
			Help: "Time from the checkpoint signal to the task's marker, by reason.",
		}, []string{"reason"}),
		commitBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "caravan_driver_checkpoint_size_bytes", Buckets: sizeBuckets,
			Help: "Size of each committed checkpoint.",
		}),
		newBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "caravan_driver_checkpoint_written_bytes_total",
			Help: "Bytes of new chunks written to the store by commits (deduplicated chunks are not counted).",
		}),
		restores: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "caravan_driver_restores_total",
			Help: "Task starts with a checkpoint block, by outcome (restored, fresh, fell_back, failed_started_fresh, failed).",
		}, []string{"outcome"}),
		restoreSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "caravan_driver_restore_duration_seconds", Buckets: checkpointBuckets,
			Help: "Time to restore a checkpoint from the store.",
		}),
		restoreBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "caravan_driver_restore_size_bytes", Buckets: sizeBuckets,
			Help: "Size of each restored checkpoint.",
		}),
	}
	m.reg = metrics.NewRegistry(m.commits, m.commitSeconds, m.taskSeconds, m.commitBytes, m.newBytes,
		m.restores, m.restoreSeconds, m.restoreBytes)
	return m
}

func (m *driverMetrics) saved(reason string, stats store.CommitStats, waited time.Duration) {
	if m == nil {
		return
	}
	m.commits.WithLabelValues(reason, outcomeSaved).Inc()
	m.commitSeconds.WithLabelValues(reason).Observe(stats.Duration.Seconds())
	if waited > 0 {
		m.taskSeconds.WithLabelValues(reason).Observe(waited.Seconds())
	}
	m.commitBytes.Observe(float64(stats.Bytes))
	m.newBytes.Add(float64(stats.NewBytes))
}

func (m *driverMetrics) outcome(reason, outcome string) {
	if m == nil {
		return
	}
	m.commits.WithLabelValues(reason, outcome).Inc()
}

func (m *driverMetrics) restored(d time.Duration, bytes int64) {
	if m == nil {
		return
	}
	m.restores.WithLabelValues(outcomeRestored).Inc()
	m.restoreSeconds.Observe(d.Seconds())
	m.restoreBytes.Observe(float64(bytes))
}

func (m *driverMetrics) restore(outcome string) {
	if m == nil {
		return
	}
	m.restores.WithLabelValues(outcome).Inc()
}

// serveMetrics serves the driver's metrics at addr ("" stops serving); a
// changed address restarts the server.
func (d *Driver) serveMetrics(addr string) error {
	d.metricsLock.Lock()
	defer d.metricsLock.Unlock()
	if d.metricsServer != nil {
		if d.metricsAddr == addr {
			return nil
		}
		_ = d.metricsServer.Close()
		d.metricsServer, d.metricsAddr = nil, ""
	}
	if addr == "" {
		return nil
	}
	srv, err := metrics.Serve(addr, d.metrics.reg, d.logger.Named("metrics"))
	if err != nil {
		return err
	}
	d.metricsServer, d.metricsAddr = srv, addr
	return nil
}
