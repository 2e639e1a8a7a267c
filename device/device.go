// Package device is caravan's fractional-GPU Nomad device plugin. Each
// physical GPU (or MIG instance) is one device group whose instances are
// shares of it, so Nomad takes all shares of one request from one GPU.
package device

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	log "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"

	"github.com/caravan-nomad/caravan/device/nvml"
	"github.com/caravan-nomad/caravan/device/procenv"
	"github.com/caravan-nomad/caravan/device/simulated"
	"github.com/caravan-nomad/caravan/internal/metrics"
	"github.com/caravan-nomad/caravan/internal/version"
)

const (
	// PluginName is the name Nomad knows the plugin by; it must equal the
	// plugin's file name in the client's plugin_dir.
	PluginName = "caravan-gpu"

	// Vendor and DeviceType name the device groups: a jobspec asks for
	// shares with device "caravan/gpushare" (never matched by a request
	// for nomad-device-nvidia's "nvidia/gpu" or a bare "gpu").
	Vendor     = "caravan"
	DeviceType = "gpushare"
)

var (
	pluginInfo = &base.PluginInfoResponse{
		Type:              base.PluginTypeDevice,
		PluginApiVersions: []string{device.ApiVersion010},
		PluginVersion:     version.Version,
		Name:              PluginName,
	}
)

// openFunc opens a backend client; tests inject mocks.
type openFunc func(s *settings) (nvml.Client, error)

// Plugin is the device plugin.
type Plugin struct {
	ctx    context.Context
	logger log.Logger
	// Named sub-loggers of the plugin's parts.
	fpLogger      log.Logger
	statsLogger   log.Logger
	healthLogger  log.Logger
	reserveLogger log.Logger
	now           func() time.Time
	open          openFunc
	// procRoot is procfs, where task environments are read for metering.
	procRoot string

	mu       sync.RWMutex
	settings *settings
	// client is nil when the nvml backend found no libnvidia-ml.
	client nvml.Client
	health *healthTracker
	inv    *inventory
	// advertised is every share ID this process has ever advertised, to
	// tell stale IDs from unknown ones.
	advertised map[string]bool
	// warned holds the share_override fields already reported as matching
	// no GPU, so each is logged once.
	warned map[string]bool
	// healthCh wakes the fingerprint loop when health changed.
	healthCh  chan struct{}
	xidCancel context.CancelFunc
	// mpsCancel ends the MPS health watch.
	mpsCancel context.CancelFunc

	reservations *reservations
	meter        *meter
	// metrics are served at the config's metrics_address, if set.
	metrics       *deviceMetrics
	metricsServer *metrics.Server
	metricsAddr   string
}

// NewPlugin returns the plugin.
func NewPlugin(ctx context.Context, logger log.Logger) *Plugin {
	logger = logger.Named(PluginName)
	return &Plugin{
		ctx:           ctx,
		logger:        logger,
		fpLogger:      logger.Named("fingerprint"),
		statsLogger:   logger.Named("stats"),
		healthLogger:  logger.Named("health"),
		reserveLogger: logger.Named("reserve"),
		warned:        map[string]bool{},
		now:           time.Now,
		open:          openBackend,
		procRoot:      procenv.DefaultRoot,
		advertised:    map[string]bool{},
		healthCh:      make(chan struct{}, 1),
		reservations:  newReservations(),
		inv:           &inventory{byUUID: map[string]*gpuEntry{}},
		metrics:       newDeviceMetrics(),
	}
}

// PluginInfo describes the plugin.
func (p *Plugin) PluginInfo() (*base.PluginInfoResponse, error) { return pluginInfo, nil }

// ConfigSchema returns the plugin block's config schema.
func (p *Plugin) ConfigSchema() (*hclspec.Spec, error) { return configSpec, nil }

// SetConfig validates and applies the plugin config and opens the backend.
func (p *Plugin) SetConfig(c *base.Config) error {
	var cfg Config
	if err := decodeConfig(c, &cfg); err != nil {
		return err
	}
	s, err := parseConfig(&cfg)
	if err != nil {
		return err
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
	p.settings = s
	p.health = newHealthTracker(s.health)
	p.meter = newMeter(p.procRoot)
	s.simulated.Logger = p.logger.Named("simulated")
	s.simulated.MPS = s.mps.Enabled
	if err := p.serveMetricsLocked(s.metricsAddress); err != nil {
		return err
	}
	if !s.enabled {
		return nil
	}
	client, err := p.open(s)
	switch {
	case errors.Is(err, nvml.ErrLibraryNotFound):
		p.logger.Info("no NVML library on this host; advertising no GPUs", "backend", s.backend, "reason", err)
		return nil
	case err != nil:
		return fmt.Errorf("caravan-gpu: open %s backend: %w", s.backend, err)
	}
	p.client = client
	p.logger.Info("backend opened", "backend", s.backend, "default_shares", s.shares)
	return nil
}

// decodeConfig decodes the agent's msgpack config; an empty config means
// all defaults.
func decodeConfig(c *base.Config, cfg *Config) error {
	if c == nil || len(c.PluginConfig) == 0 {
		*cfg = Config{Enabled: true, Backend: BackendNVML, Shares: defaultShares}
		return nil
	}
	if err := base.MsgPackDecode(c.PluginConfig, cfg); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

func openBackend(s *settings) (nvml.Client, error) {
	if s.backend == BackendSimulated {
		return simulated.New(s.simulated), nil
	}
	return nvml.New()
}

// closeLocked releases the backend; p.mu must be held.
func (p *Plugin) closeLocked() {
	if p.xidCancel != nil {
		p.xidCancel()
		p.xidCancel = nil
	}
	if p.mpsCancel != nil {
		p.mpsCancel()
		p.mpsCancel = nil
	}
	if p.client != nil {
		if err := p.client.Close(); err != nil {
			p.logger.Warn("closing backend failed", "error", err)
		}
		p.client = nil
	}
}

// Shutdown releases the backend (NVML Shutdown pairs with Init).
func (p *Plugin) Shutdown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
	_ = p.serveMetricsLocked("")
}

// state returns the current settings and client under the read lock.
func (p *Plugin) state() (*settings, nvml.Client, *healthTracker) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.settings, p.client, p.health
}
