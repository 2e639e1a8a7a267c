//go:build linux

package device

import (
	"context"
	"testing"
	"time"

	log "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/device/nvml"
	"github.com/caravan-nomad/caravan/device/simulated"
)

// TestGRPC_SimulatedRoundTrip drives the plugin through Nomad's device
// plugin gRPC client and server, as a Nomad client would, on the simulated
// backend: what the plugin returns must survive the wire.
func TestGRPC_SimulatedRoundTrip(t *testing.T) {
	proc := newFakeProc(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	impl := NewPlugin(ctx, log.NewNullLogger())
	impl.procRoot = proc.root
	impl.open = func(s *settings) (nvml.Client, error) {
		cfg := s.simulated
		cfg.ProcRoot = proc.root
		return simulated.New(cfg), nil
	}
	client, _ := plugin.TestPluginGRPCConn(t, map[string]plugin.Plugin{
		base.PluginTypeBase:   &base.PluginBase{Impl: impl},
		base.PluginTypeDevice: &device.PluginDevice{Impl: impl},
	})
	// Closing the client shuts the server down through go-plugin's
	// controller; stopping the server as well races inside go-plugin.
	defer client.Close()
	raw, err := client.Dispense(base.PluginTypeDevice)
	must.NoError(t, err)
	dp := raw.(device.DevicePlugin)

	info, err := dp.PluginInfo()
	must.NoError(t, err)
	must.Eq(t, PluginName, info.Name)
	must.Eq(t, base.PluginTypeDevice, info.Type)
	spec, err := dp.ConfigSchema()
	must.NoError(t, err)
	must.NotNil(t, spec)

	cfg, err := pluginConfig(t, `config {
		backend = "simulated"
		shares  = 4
		simulated {
			seed = "grpc"
			gpu {
				model      = "NVIDIA A100-SXM4-40GB"
				memory_mib = 40960
				usage {
					memory_mib = 512
					sm_percent = 10
				}
			}
			gpu {
				model      = "NVIDIA A100-SXM4-80GB"
				memory_mib = 81920
				mig {
					profile    = "3g.40gb"
					memory_mib = 40192
				}
				mig {
					profile    = "3g.40gb"
					memory_mib = 40192
				}
			}
		}
		share_override {
			gpu    = "model:3g.40gb"
			shares = 2
		}
	}`)
	must.NoError(t, err)
	must.NoError(t, dp.SetConfig(cfg))

	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	fch, err := dp.Fingerprint(fctx)
	must.NoError(t, err)
	var fp *device.FingerprintResponse
	select {
	case fp = <-fch:
	case <-time.After(10 * time.Second):
		t.Fatal("no fingerprint over gRPC")
	}
	must.NoError(t, fp.Error)
	must.Len(t, 3, fp.Devices, must.Sprint("one whole GPU and two MIG instances"))
	whole := fp.Devices[0]
	must.Eq(t, Vendor, whole.Vendor)
	must.Eq(t, DeviceType, whole.Type)
	must.Len(t, 4, whole.Devices)
	must.Eq(t, "simulated", *whole.Attributes[AttrBackend].String)
	must.True(t, *whole.Attributes[AttrSimulated].Bool)
	must.Eq(t, int64(10240), *whole.Attributes[AttrMemoryPerShare].Int)
	must.Eq(t, "MiB", whole.Attributes[AttrMemoryPerShare].Unit)
	must.NotNil(t, whole.Devices[0].HwLocality)
	for _, mig := range fp.Devices[1:] {
		must.True(t, *mig.Attributes[AttrMIG].Bool)
		must.Len(t, 2, mig.Devices)
		must.Eq(t, int64(20096), *mig.Attributes[AttrMemoryPerShare].Int)
	}

	res, err := dp.Reserve([]string{whole.Devices[1].ID, whole.Devices[2].ID})
	must.NoError(t, err)
	must.Eq(t, whole.Name, res.Envs[EnvCUDAVisibleDevices])
	must.Eq(t, "simulated", res.Envs[EnvBackend])
	_, err = dp.Reserve([]string{"GPU-nope-share-0"})
	must.ErrorContains(t, err, "no GPU GPU-nope on this node")

	proc.setEnv(t, 4000, res.Envs)
	sch, err := dp.Stats(fctx, 50*time.Millisecond)
	must.NoError(t, err)
	deadline := time.After(10 * time.Second)
	for {
		var st *device.StatsResponse
		select {
		case st = <-sch:
		case <-deadline:
			t.Fatal("no attributed stats over gRPC")
		}
		must.NoError(t, st.Error)
		var shares map[string]*device.DeviceStats
		for _, g := range st.Groups {
			if g.Name == whole.Name {
				shares = g.InstanceStats
			}
		}
		s := shares[whole.Devices[1].ID]
		if s == nil || *s.Stats.Attributes[StatProcesses].IntNumeratorVal == 0 {
			continue
		}
		must.Eq(t, int64(512), *s.Summary.IntNumeratorVal)
		must.Eq(t, int64(20480), *s.Summary.IntDenominatorVal)
		must.Eq(t, res.Envs[EnvReservation], *s.Stats.Attributes[StatReservation].StringVal)
		must.False(t, *s.Stats.Attributes[StatOverLimit].BoolVal)
		must.Eq(t, int64(10), *s.Stats.Nested[StatGPU].Attributes[StatGPUUtilization].IntNumeratorVal)
		must.Eq(t, int64(0), *shares[whole.Devices[0].ID].Summary.IntNumeratorVal)
		return
	}
}
