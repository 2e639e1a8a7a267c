//go:build linux && cgo

package nvml

import (
	"context"
	"errors"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/shoenig/test/must"
)

// This host has no GPU and no libnvidia-ml: the real loader must say so
// with ErrLibraryNotFound, which the plugin turns into "no devices".
func TestNew_NoLibraryOnThisHost(t *testing.T) {
	c, err := New()
	if err == nil {
		c.Close()
		t.Skip("this host has libnvidia-ml")
	}
	must.ErrorIs(t, err, ErrLibraryNotFound)
}

func TestAdapter_InitFailure(t *testing.T) {
	_, err := NewAdapter(&mock.Interface{InitFunc: func() gonvml.Return { return gonvml.ERROR_DRIVER_NOT_LOADED }})
	must.ErrorIs(t, err, gonvml.ERROR_DRIVER_NOT_LOADED)
	must.False(t, errors.Is(err, ErrLibraryNotFound))
}

func TestAdapter_StatusMergesComputeAndMPS(t *testing.T) {
	srv := dgxh100.New()
	dev := srv.Devices[0].(*server.Device)
	dev.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) { return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED }
	dev.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
	dev.GetTemperatureFunc = func(gonvml.TemperatureSensors) (uint32, gonvml.Return) { return 30, gonvml.SUCCESS }
	dev.GetTotalEccErrorsFunc = func(gonvml.MemoryErrorType, gonvml.EccCounterType) (uint64, gonvml.Return) {
		return 0, gonvml.ERROR_NOT_SUPPORTED
	}
	dev.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		return []gonvml.ProcessInfo{{Pid: 1, UsedGpuMemory: 100}, {Pid: 2, UsedGpuMemory: 200}}, gonvml.SUCCESS
	}
	dev.GetMPSComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		return []gonvml.ProcessInfo{{Pid: 3, UsedGpuMemory: 300}}, gonvml.SUCCESS
	}
	var since uint64
	dev.GetProcessUtilizationFunc = func(s uint64) ([]gonvml.ProcessUtilizationSample, gonvml.Return) {
		since = s
		return []gonvml.ProcessUtilizationSample{
			{Pid: 1, TimeStamp: 50, SmUtil: 10},
			{Pid: 1, TimeStamp: 70, SmUtil: 30},
			{Pid: 3, TimeStamp: 60, SmUtil: 5},
			{Pid: 9, TimeStamp: 90, SmUtil: 99}, // exited since
		}, gonvml.SUCCESS
	}
	a, err := NewAdapter(srv)
	must.NoError(t, err)
	gpus, err := a.GPUs()
	must.NoError(t, err)
	must.Len(t, 8, gpus)

	st, err := a.Status(gpus[0].UUID, 40)
	must.NoError(t, err)
	must.Eq(t, uint64(40), since)
	must.Eq(t, uint64(90), st.LastSampleMicros)
	must.Eq(t, []Process{
		{PID: 1, UsedMemoryBytes: 100, SMUtilPercent: 30},
		{PID: 2, UsedMemoryBytes: 200},
		{PID: 3, UsedMemoryBytes: 300, SMUtilPercent: 5, MPS: true},
	}, st.Processes)
	must.Nil(t, st.GPUUtilPercent, must.Sprint("not supported: absent, not zero"))
	must.Nil(t, st.PowerMilliwatts)
	must.Nil(t, st.ECCUncorrected)
	must.Eq(t, uint32(30), *st.TemperatureCelsius)
	must.Eq(t, uint64(81920)<<20, st.MemoryTotalBytes)

	dev.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) { return nil, gonvml.ERROR_UNKNOWN }
	_, err = a.Status(gpus[0].UUID, 0)
	must.ErrorIs(t, err, gonvml.ERROR_UNKNOWN)
}

func TestAdapter_XidOnMIGInstance(t *testing.T) {
	srv := dgxh100.New()
	dev := srv.Devices[1].(*server.Device)
	dev.GetMigModeFunc = func() (int, int, gonvml.Return) {
		return gonvml.DEVICE_MIG_ENABLE, gonvml.DEVICE_MIG_ENABLE, gonvml.SUCCESS
	}
	dev.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 7, gonvml.SUCCESS }
	mig := &mock.Device{
		GetUUIDFunc:          func() (string, gonvml.Return) { return "MIG-one", gonvml.SUCCESS },
		GetNameFunc:          func() (string, gonvml.Return) { return "NVIDIA H100 80GB HBM3 MIG 3g.40gb", gonvml.SUCCESS },
		GetMemoryInfoFunc:    func() (gonvml.Memory, gonvml.Return) { return gonvml.Memory{Total: 40 << 30}, gonvml.SUCCESS },
		GetGpuInstanceIdFunc: func() (int, gonvml.Return) { return 2, gonvml.SUCCESS },
	}
	dev.GetMigDeviceHandleByIndexFunc = func(i int) (gonvml.Device, gonvml.Return) {
		if i == 0 {
			return mig, gonvml.SUCCESS
		}
		return nil, gonvml.ERROR_NOT_FOUND
	}
	registered := 0
	for _, d := range srv.Devices {
		d.(*server.Device).RegisterEventsFunc = func(uint64, gonvml.EventSet) gonvml.Return {
			registered++
			return gonvml.SUCCESS
		}
	}
	events := make(chan gonvml.EventData, 2)
	srv.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(ms uint32) (gonvml.EventData, gonvml.Return) {
				select {
				case ev := <-events:
					return ev, gonvml.SUCCESS
				case <-time.After(time.Duration(ms) * time.Millisecond):
					return gonvml.EventData{}, gonvml.ERROR_TIMEOUT
				}
			},
			FreeFunc: func() gonvml.Return { return gonvml.SUCCESS },
		}, gonvml.SUCCESS
	}
	a, err := NewAdapter(srv)
	must.NoError(t, err)
	gpus, err := a.GPUs()
	must.NoError(t, err)
	must.Len(t, 9, gpus)
	must.Eq(t, "3g.40gb", gpus[2].MIGProfile)
	must.Eq(t, "NVIDIA H100 80GB HBM3", gpus[2].Model)

	ctx, cancel := context.WithCancel(t.Context())
	ch, err := a.WatchXid(ctx)
	must.NoError(t, err)
	must.Eq(t, 8, registered, must.Sprint("events are registered on physical GPUs only"))
	events <- gonvml.EventData{Device: dev, EventType: gonvml.EventTypeXidCriticalError, EventData: 94, GpuInstanceId: 2}
	events <- gonvml.EventData{Device: dev, EventType: gonvml.EventTypeXidCriticalError, EventData: 79, GpuInstanceId: 0xFFFFFFFF}
	ev := <-ch
	must.Eq(t, "MIG-one", ev.UUID)
	must.Eq(t, uint64(94), ev.Xid)
	ev = <-ch
	must.Eq(t, dev.UUID, ev.UUID, must.Sprint("an Xid not tied to an instance is the whole GPU's"))
	cancel()
	for range ch {
	}
}

// TestAdapter_StatusMPSClientListedOnce: on a real H100 (driver 580.159.04,
// 2026-11-24) NVML lists every MPS client in both the compute and the MPS
// process lists, each with its full memory (nvidia-smi shows it once, as
// "M+C"). The client is one process: its memory counts once, and it is
// marked MPS. The MPS server itself is only in the compute list.
func TestAdapter_StatusMPSClientListedOnce(t *testing.T) {
	srv := dgxh100.New()
	dev := srv.Devices[0].(*server.Device)
	const mib = uint64(1) << 20
	dev.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		return []gonvml.ProcessInfo{
			{Pid: 1202, UsedGpuMemory: 66 * mib}, // nvidia-cuda-mps-server
			{Pid: 1213, UsedGpuMemory: 3638 * mib},
			{Pid: 1214, UsedGpuMemory: 6710 * mib},
		}, gonvml.SUCCESS
	}
	dev.GetMPSComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		return []gonvml.ProcessInfo{
			{Pid: 1213, UsedGpuMemory: 3638 * mib},
			{Pid: 1214, UsedGpuMemory: 6710 * mib},
		}, gonvml.SUCCESS
	}
	dev.GetProcessUtilizationFunc = func(uint64) ([]gonvml.ProcessUtilizationSample, gonvml.Return) {
		return nil, gonvml.ERROR_NOT_FOUND
	}
	notSupported(dev)
	a, err := NewAdapter(srv)
	must.NoError(t, err)
	gpus, err := a.GPUs()
	must.NoError(t, err)
	st, err := a.Status(gpus[0].UUID, 0)
	must.NoError(t, err)
	must.Eq(t, []Process{
		{PID: 1202, UsedMemoryBytes: 66 * mib},
		{PID: 1213, UsedMemoryBytes: 3638 * mib, MPS: true},
		{PID: 1214, UsedMemoryBytes: 6710 * mib, MPS: true},
	}, st.Processes)
}

// notSupported makes the GPU-wide counters Status reads answer "not
// supported", for tests about its process list.
func notSupported(dev *server.Device) {
	dev.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) { return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED }
	dev.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
	dev.GetTemperatureFunc = func(gonvml.TemperatureSensors) (uint32, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
	dev.GetTotalEccErrorsFunc = func(gonvml.MemoryErrorType, gonvml.EccCounterType) (uint64, gonvml.Return) {
		return 0, gonvml.ERROR_NOT_SUPPORTED
	}
}

// TestAdapter_StatusMemoryNeverWraps: NVML_VALUE_NOT_AVAILABLE counts as
// 0, and a process listed twice in one list with more than the rest of
// uint64 saturates instead of wrapping the sum to a small number.
func TestAdapter_StatusMemoryNeverWraps(t *testing.T) {
	srv := dgxh100.New()
	dev := srv.Devices[0].(*server.Device)
	notSupported(dev)
	dev.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		return []gonvml.ProcessInfo{{Pid: 1, UsedGpuMemory: 100}, {Pid: 2, UsedGpuMemory: 1 << 63}, {Pid: 2, UsedGpuMemory: 1 << 63}}, gonvml.SUCCESS
	}
	dev.GetMPSComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		return []gonvml.ProcessInfo{{Pid: 1, UsedGpuMemory: valueNotAvailable}}, gonvml.SUCCESS
	}
	dev.GetProcessUtilizationFunc = func(uint64) ([]gonvml.ProcessUtilizationSample, gonvml.Return) {
		return nil, gonvml.ERROR_NOT_FOUND
	}
	a, err := NewAdapter(srv)
	must.NoError(t, err)
	gpus, err := a.GPUs()
	must.NoError(t, err)
	st, err := a.Status(gpus[0].UUID, 0)
	must.NoError(t, err)
	must.Eq(t, []Process{{PID: 1, UsedMemoryBytes: 100, MPS: true}, {PID: 2, UsedMemoryBytes: valueNotAvailable}}, st.Processes)
}
