// Package driver is caravan's checkpointing Nomad task driver.
package driver

import (
	"context"
	"errors"
	"time"

	log "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"
	pstructs "github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/caravan-nomad/caravan/internal/version"
)

const (
	// PluginName is the name jobspecs use in `driver = "..."`; it must equal
	// the plugin's file name in the client's plugin_dir.
	PluginName = "caravan"
)

var (
	pluginInfo = &base.PluginInfoResponse{
		Type:              base.PluginTypeDriver,
		PluginApiVersions: []string{drivers.ApiVersion010},
		PluginVersion:     version.Version,
		Name:              PluginName,
	}
	configSpec = hclspec.NewObject(map[string]*hclspec.Spec{
		"checkpoint_store":  hclspec.NewAttr("checkpoint_store", "string", false),
		"checkpoint_retain": hclspec.NewDefault(hclspec.NewAttr("checkpoint_retain", "number", false), hclspec.NewLiteral("3")),
	})
	taskConfigSpec = hclspec.NewObject(map[string]*hclspec.Spec{})
	capabilities   = &drivers.Capabilities{SendSignals: true, Exec: false, FSIsolation: drivers.FSIsolationNone}
	errNotYet      = errors.New("caravan driver: not implemented yet")
)

// Driver is the task driver.
type Driver struct {
	ctx    context.Context
	logger log.Logger
}

// NewDriver returns the driver.
func NewDriver(ctx context.Context, logger log.Logger) *Driver {
	return &Driver{ctx: ctx, logger: logger.Named(PluginName)}
}

func (d *Driver) PluginInfo() (*base.PluginInfoResponse, error) { return pluginInfo, nil }
func (d *Driver) ConfigSchema() (*hclspec.Spec, error)          { return configSpec, nil }
func (d *Driver) SetConfig(*base.Config) error                  { return nil }
func (d *Driver) TaskConfigSchema() (*hclspec.Spec, error)      { return taskConfigSpec, nil }
func (d *Driver) Capabilities() (*drivers.Capabilities, error)  { return capabilities, nil }

func (d *Driver) Fingerprint(ctx context.Context) (<-chan *drivers.Fingerprint, error) {
	ch := make(chan *drivers.Fingerprint, 1)
	ch <- &drivers.Fingerprint{
		Health:            drivers.HealthStateHealthy,
		HealthDescription: drivers.DriverHealthy,
		Attributes:        map[string]*pstructs.Attribute{"driver.caravan.version": pstructs.NewStringAttribute(version.Version)},
	}
	return ch, nil
}

func (d *Driver) RecoverTask(*drivers.TaskHandle) error { return errNotYet }
func (d *Driver) StartTask(*drivers.TaskConfig) (*drivers.TaskHandle, *drivers.DriverNetwork, error) {
	return nil, nil, errNotYet
}
func (d *Driver) WaitTask(context.Context, string) (<-chan *drivers.ExitResult, error) {
	return nil, errNotYet
}
func (d *Driver) StopTask(string, time.Duration, string) error    { return errNotYet }
func (d *Driver) DestroyTask(string, bool) error                  { return nil }
func (d *Driver) InspectTask(string) (*drivers.TaskStatus, error) { return nil, errNotYet }
func (d *Driver) TaskStats(context.Context, string, time.Duration) (<-chan *drivers.TaskResourceUsage, error) {
	return nil, errNotYet
}
func (d *Driver) TaskEvents(ctx context.Context) (<-chan *drivers.TaskEvent, error) {
	return make(chan *drivers.TaskEvent), nil
}
func (d *Driver) SignalTask(string, string) error { return errNotYet }
func (d *Driver) ExecTask(string, []string, time.Duration) (*drivers.ExecTaskResult, error) {
	return nil, errNotYet
}
