//go:build linux

package device

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	log "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl"
	"github.com/hashicorp/hcl/hcl/ast"
	"github.com/hashicorp/nomad/helper/pluginutils/hclspecutils"
	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/mitchellh/mapstructure"
	"github.com/shoenig/test/must"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"

	"github.com/caravan-nomad/caravan/device/nvml"
)

// fakeGPUs is go-nvml's DGX H100 mock with the metering funcs set: each
// GPU reports the processes and utilisation samples a test gives it, and
// Xid events come from a channel.
type fakeGPUs struct {
	srv  *server.Server
	devs []*server.Device

	mu      sync.Mutex
	procs   map[int][]gonvml.ProcessInfo
	samples map[int][]gonvml.ProcessUtilizationSample
	failing map[int]gonvml.Return
	visible int
	events  chan gonvml.EventData
	// counts is how many times the GPUs were counted: one per fingerprint
	// pass, so a test can wait for passes rather than for time.
	counts int
}

// countCalls is how many fingerprint passes have counted the GPUs so far.
func (f *fakeGPUs) countCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts
}

func newFakeGPUs(t testing.TB) *fakeGPUs {
	t.Helper()
	f := &fakeGPUs{
		srv:     dgxh100.New(),
		procs:   map[int][]gonvml.ProcessInfo{},
		samples: map[int][]gonvml.ProcessUtilizationSample{},
		failing: map[int]gonvml.Return{},
		events:  make(chan gonvml.EventData, 16),
	}
	for i, d := range f.srv.Devices {
		dev := d.(*server.Device)
		f.devs = append(f.devs, dev)
		f.instrument(i, dev)
	}
	f.visible = len(f.devs)
	f.srv.DeviceGetCountFunc = func() (int, gonvml.Return) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.counts++
		return f.visible, gonvml.SUCCESS
	}
	f.srv.DeviceGetHandleByIndexFunc = func(i int) (gonvml.Device, gonvml.Return) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if i < 0 || i >= f.visible {
			return nil, gonvml.ERROR_INVALID_ARGUMENT
		}
		return f.devs[i], gonvml.SUCCESS
	}
	f.srv.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(ms uint32) (gonvml.EventData, gonvml.Return) {
				select {
				case ev := <-f.events:
					return ev, gonvml.SUCCESS
				case <-time.After(time.Duration(ms) * time.Millisecond):
					return gonvml.EventData{}, gonvml.ERROR_TIMEOUT
				}
			},
			FreeFunc: func() gonvml.Return { return gonvml.SUCCESS },
		}, gonvml.SUCCESS
	}
	return f
}

func (f *fakeGPUs) instrument(i int, dev *server.Device) {
	mem := dev.GetMemoryInfoFunc
	dev.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
		f.mu.Lock()
		ret, failing := f.failing[i]
		f.mu.Unlock()
		if failing {
			return gonvml.Memory{}, ret
		}
		return mem()
	}
	// The mock leaves the bus ID empty; real NVML fills it.
	dev.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) {
		var pci gonvml.PciInfo
		for j, c := range []byte(dev.PciBusID) {
			pci.BusId[j] = int8(c)
		}
		return pci, gonvml.SUCCESS
	}
	dev.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{Gpu: 55, Memory: 20}, gonvml.SUCCESS
	}
	dev.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 312_000, gonvml.SUCCESS }
	dev.GetTemperatureFunc = func(gonvml.TemperatureSensors) (uint32, gonvml.Return) { return 41, gonvml.SUCCESS }
	dev.GetTotalEccErrorsFunc = func(gonvml.MemoryErrorType, gonvml.EccCounterType) (uint64, gonvml.Return) {
		return 0, gonvml.SUCCESS
	}
	dev.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.procs[i], gonvml.SUCCESS
	}
	dev.GetMPSComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		return nil, gonvml.ERROR_NOT_FOUND
	}
	dev.GetProcessUtilizationFunc = func(since uint64) ([]gonvml.ProcessUtilizationSample, gonvml.Return) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.samples[i]) == 0 {
			// NVML's answer when nothing ran since the last sample.
			return nil, gonvml.ERROR_NOT_FOUND
		}
		return f.samples[i], gonvml.SUCCESS
	}
	dev.RegisterEventsFunc = func(uint64, gonvml.EventSet) gonvml.Return { return gonvml.SUCCESS }
}

func (f *fakeGPUs) uuid(i int) string { return f.devs[i].UUID }

// setVisible makes NVML list only the first n GPUs, as when GPUs fail or
// are removed.
func (f *fakeGPUs) setVisible(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.visible = n
}

func (f *fakeGPUs) setProcs(i int, procs []gonvml.ProcessInfo, samples []gonvml.ProcessUtilizationSample) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.procs[i], f.samples[i] = procs, samples
}

func (f *fakeGPUs) fail(i int, ret gonvml.Return) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ret == gonvml.SUCCESS {
		delete(f.failing, i)
		return
	}
	f.failing[i] = ret
}

// nvmlCalls counts every NVML call recorded by the mock server and its
// devices, by reflection over the mock's <Method>Calls accessors.
func (f *fakeGPUs) nvmlCalls() int {
	n := countMockCalls(&f.srv.Interface)
	for _, d := range f.devs {
		n += countMockCalls(&d.Device)
	}
	return n
}

func countMockCalls(m any) int {
	v := reflect.ValueOf(m)
	t := v.Type()
	n := 0
	for i := 0; i < t.NumMethod(); i++ {
		meth := t.Method(i)
		if !strings.HasSuffix(meth.Name, "Calls") || meth.Type.NumIn() != 1 || meth.Type.NumOut() != 1 {
			continue
		}
		n += v.Method(i).Call(nil)[0].Len()
	}
	return n
}

// fakeProc is a procfs stand-in holding task environments.
type fakeProc struct{ root string }

func newFakeProc(t testing.TB) *fakeProc { return &fakeProc{root: t.TempDir()} }

func (p *fakeProc) setEnv(t testing.TB, pid int, env map[string]string) {
	t.Helper()
	dir := filepath.Join(p.root, strconv.Itoa(pid))
	must.NoError(t, os.MkdirAll(dir, 0o755))
	var b strings.Builder
	for k, v := range env {
		b.WriteString(k + "=" + v + "\x00")
	}
	must.NoError(t, os.WriteFile(filepath.Join(dir, "environ"), []byte(b.String()), 0o644))
}

// pluginConfig turns a `config { ... }` HCL snippet into the msgpack the
// Nomad agent hands SetConfig, going through the plugin's schema exactly as
// the agent's plugin loader does.
func pluginConfig(t testing.TB, src string) (*base.Config, error) {
	t.Helper()
	raw, err := hclToInterface(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	spec, diags := hclspecutils.Convert(configSpec)
	must.False(t, diags.HasErrors())
	val, diags, errs := hclutils.ParseHclInterface(raw, spec, nil)
	if diags.HasErrors() {
		return nil, fmt.Errorf("%w: %s", ErrInvalidConfig, diags.Error())
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, errs)
	}
	data, err := ctymsgpack.Marshal(val, val.Type())
	must.NoError(t, err)
	return &base.Config{PluginConfig: data}, nil
}

// hclToInterface decodes `config { ... }` the way Nomad's jobspec and
// agent parsers do (HCL v1 into a generic map).
func hclToInterface(src string) (any, error) {
	root, err := hcl.Parse(src)
	if err != nil {
		return nil, err
	}
	list, ok := root.Node.(*ast.ObjectList)
	if !ok || len(list.Items) == 0 {
		return nil, fmt.Errorf("no config block")
	}
	var m map[string]any
	if err := hcl.DecodeObject(&m, list.Items[0]); err != nil {
		return nil, err
	}
	var m2 map[string]any
	if err := mapstructure.WeakDecode(m, &m2); err != nil {
		return nil, err
	}
	return m2["config"], nil
}

// newTestPlugin configures a plugin over lib (nil: use the backend named
// in the config) with procfs at proc.
func newTestPlugin(t testing.TB, cfg string, lib gonvml.Interface, proc *fakeProc) *Plugin {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := NewPlugin(ctx, log.NewNullLogger())
	if proc != nil {
		p.procRoot = proc.root
	}
	if lib != nil {
		p.open = func(*settings) (nvml.Client, error) { return nvml.NewAdapter(lib) }
	}
	c, err := pluginConfig(t, cfg)
	must.NoError(t, err)
	must.NoError(t, p.SetConfig(c))
	t.Cleanup(p.Shutdown)
	return p
}

// newFingerprinted returns fake GPUs, a fake procfs and a plugin with the
// default config over them, fingerprinted once.
func newFingerprinted(t testing.TB) (*fakeGPUs, *fakeProc, *Plugin) {
	t.Helper()
	f := newFakeGPUs(t)
	proc := newFakeProc(t)
	p := newTestPlugin(t, `config {}`, f.srv, proc)
	p.fingerprintOnce()
	return f, proc, p
}

// reserveAB reserves shares 0 and 1 of gpu (A) and share 2 (B), and gives
// PID 100 A's environment and PID 200 B's.
func reserveAB(t testing.TB, p *Plugin, proc *fakeProc, gpu string) (resA, resB *device.ContainerReservation) {
	t.Helper()
	resA, err := p.Reserve([]string{shareID(gpu, 0), shareID(gpu, 1)})
	must.NoError(t, err)
	resB, err = p.Reserve([]string{shareID(gpu, 2)})
	must.NoError(t, err)
	proc.setEnv(t, 100, resA.Envs)
	proc.setEnv(t, 200, resB.Envs)
	return resA, resB
}
