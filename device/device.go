// Package device is caravan's fractional-GPU Nomad device plugin.
package device

import (
	"context"
	"errors"
	"time"

	log "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"

	"github.com/caravan-nomad/caravan/internal/version"
)

const (
	// PluginName is the name Nomad knows the plugin by; it must equal the
	// plugin's file name in the client's plugin_dir.
	PluginName = "caravan-gpu"
)

var (
	pluginInfo = &base.PluginInfoResponse{
		Type:              base.PluginTypeDevice,
		PluginApiVersions: []string{device.ApiVersion010},
		PluginVersion:     version.Version,
		Name:              PluginName,
	}
	configSpec = hclspec.NewObject(map[string]*hclspec.Spec{})
)

// Plugin is the device plugin.
type Plugin struct {
	ctx    context.Context
	logger log.Logger
}

// NewPlugin returns the plugin.
func NewPlugin(ctx context.Context, logger log.Logger) *Plugin {
	return &Plugin{ctx: ctx, logger: logger.Named(PluginName)}
}

func (p *Plugin) PluginInfo() (*base.PluginInfoResponse, error) { return pluginInfo, nil }

func (p *Plugin) ConfigSchema() (*hclspec.Spec, error) { return configSpec, nil }

func (p *Plugin) SetConfig(*base.Config) error { return nil }

func (p *Plugin) Fingerprint(ctx context.Context) (<-chan *device.FingerprintResponse, error) {
	ch := make(chan *device.FingerprintResponse, 1)
	ch <- &device.FingerprintResponse{}
	return ch, nil
}

func (p *Plugin) Reserve(ids []string) (*device.ContainerReservation, error) {
	return nil, errors.New("caravan-gpu: no devices")
}

func (p *Plugin) Stats(ctx context.Context, interval time.Duration) (<-chan *device.StatsResponse, error) {
	ch := make(chan *device.StatsResponse)
	return ch, nil
}
