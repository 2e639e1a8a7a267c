// Package metrics builds the Prometheus registries of caravan's parts (the
// planner's /v1/metrics, and the device plugin's and the driver's optional
// metrics_address): Go runtime and process collectors, caravan_build_info,
// and a loopback-only HTTP server for the plugins.
package metrics

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/caravan-nomad/caravan/internal/version"
)

// NewRegistry returns a registry with the go_*, process_* and
// caravan_build_info metrics, and the given collectors.
func NewRegistry(cs ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		BuildInfo(),
	)
	reg.MustRegister(cs...)
	return reg
}

// BuildInfo is caravan_build_info{version,revision,goversion} = 1.
func BuildInfo() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "caravan_build_info",
		Help: "Always 1; the labels say which caravan build this is.",
		ConstLabels: prometheus.Labels{
			"version": version.Version, "revision": version.GitCommit, "goversion": runtime.Version(),
		},
	})
	g.Set(1)
	return g
}
