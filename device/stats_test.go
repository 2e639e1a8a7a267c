//go:build linux

package device

import (
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/shoenig/test/must"
)

const gib = uint64(1) << 30

func statsFor(t *testing.T, resp *device.StatsResponse, uuid string) map[string]*device.DeviceStats {
	t.Helper()
	must.NoError(t, resp.Error)
	for _, g := range resp.Groups {
		if g.Name == uuid {
			must.Eq(t, Vendor, g.Vendor)
			must.Eq(t, DeviceType, g.Type)
			return g.InstanceStats
		}
	}
	t.Fatalf("no stats for %s", uuid)
	return nil
}

func intStat(t *testing.T, s *device.DeviceStats, name string) int64 {
	t.Helper()
	v := s.Stats.Attributes[name]
	must.NotNil(t, v, must.Sprint(name))
	return *v.IntNumeratorVal
}

func gpuStat(t *testing.T, s *device.DeviceStats, name string) int64 {
	t.Helper()
	g := s.Stats.Nested[StatGPU]
	must.NotNil(t, g)
	v := g.Attributes[name]
	must.NotNil(t, v, must.Sprint(name))
	return *v.IntNumeratorVal
}

func boolStat(t *testing.T, s *device.DeviceStats, name string) bool {
	t.Helper()
	v := s.Stats.Attributes[name]
	must.NotNil(t, v, must.Sprint(name))
	return *v.BoolVal
}

// TestStats_Attribution reserves 2 shares (A) and 1 share (B) of GPU 0,
// runs two processes for A, one for B that exceeds its limit, and one
// process of no reservation, and checks what each share reports.
func TestStats_Attribution(t *testing.T) {
	f, proc, p := newFingerprinted(t)
	g0 := f.uuid(0)
	resA, _ := reserveAB(t, p, proc, g0)
	proc.setEnv(t, 101, resA.Envs)
	proc.setEnv(t, 300, map[string]string{"PATH": "/usr/bin"})
	// PID 400 has no readable environment (exited or another namespace).
	f.setProcs(0, []gonvml.ProcessInfo{
		{Pid: 100, UsedGpuMemory: 8 * gib},
		{Pid: 101, UsedGpuMemory: 4 * gib},
		{Pid: 200, UsedGpuMemory: 30 * gib},
		{Pid: 300, UsedGpuMemory: 1 * gib},
		{Pid: 400, UsedGpuMemory: 1 * gib},
	}, []gonvml.ProcessUtilizationSample{
		{Pid: 100, TimeStamp: 10, SmUtil: 30},
		{Pid: 101, TimeStamp: 11, SmUtil: 10},
		{Pid: 200, TimeStamp: 12, SmUtil: 50},
	})

	stats := statsFor(t, p.collectStats(), g0)
	must.MapLen(t, 4, stats)
	for _, i := range []int{0, 1} {
		s := stats[shareID(g0, i)]
		must.Eq(t, int64(12288), intStat(t, s, StatMemoryUsed))
		must.Eq(t, int64(40960), *s.Stats.Attributes[StatMemoryUsed].IntDenominatorVal)
		must.Eq(t, int64(40960), intStat(t, s, StatMemoryLimit))
		must.Eq(t, int64(40), intStat(t, s, StatSMUtilization))
		must.Eq(t, int64(2), intStat(t, s, StatProcesses))
		must.Eq(t, int64(2), intStat(t, s, StatReservationShares))
		must.False(t, boolStat(t, s, StatOverLimit))
		must.Eq(t, resA.Envs[EnvReservation], *s.Stats.Attributes[StatReservation].StringVal)
		must.Eq(t, s.Stats.Attributes[StatMemoryUsed], s.Summary)
	}
	b := stats[shareID(g0, 2)]
	must.Eq(t, int64(30720), intStat(t, b, StatMemoryUsed))
	must.Eq(t, int64(20480), intStat(t, b, StatMemoryLimit))
	must.Eq(t, int64(50), intStat(t, b, StatSMUtilization))
	must.True(t, boolStat(t, b, StatOverLimit))

	free := stats[shareID(g0, 3)]
	must.Eq(t, int64(0), intStat(t, free, StatMemoryUsed))
	must.Eq(t, int64(20480), intStat(t, free, StatMemoryLimit))
	must.False(t, boolStat(t, free, StatOverLimit))
	must.MapNotContainsKey(t, free.Stats.Attributes, StatReservation)

	// GPU-wide values appear on every share.
	must.Eq(t, int64(2048), gpuStat(t, free, StatGPUMemoryUnattributed))
	must.Eq(t, int64(55), gpuStat(t, free, StatGPUUtilization))
	must.Eq(t, int64(312), gpuStat(t, free, StatGPUPower))
	must.Eq(t, int64(41), gpuStat(t, free, StatGPUTemperature))
	must.Eq(t, int64(0), gpuStat(t, free, StatGPUECCErrors))

	// Other GPUs: idle, nothing attributed.
	other := statsFor(t, p.collectStats(), f.uuid(1))
	must.Eq(t, int64(0), intStat(t, other[shareID(f.uuid(1), 0)], StatProcesses))
}

// TestStats_AttributionSurvivesPluginRestart: a new plugin process has no
// reservation records, yet attributes by the environment tasks carry.
func TestStats_AttributionSurvivesPluginRestart(t *testing.T) {
	f := newFakeGPUs(t)
	proc := newFakeProc(t)
	first := newTestPlugin(t, `config {}`, f.srv, proc)
	first.fingerprintOnce()
	g3 := f.uuid(3)
	res, err := first.Reserve([]string{shareID(g3, 1), shareID(g3, 2), shareID(g3, 3)})
	must.NoError(t, err)
	proc.setEnv(t, 4242, res.Envs)
	f.setProcs(3, []gonvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 70 * gib}}, nil)

	restarted := newTestPlugin(t, `config {}`, f.srv, proc)
	restarted.fingerprintOnce()
	stats := statsFor(t, restarted.collectStats(), g3)
	s := stats[shareID(g3, 2)]
	must.Eq(t, int64(71680), intStat(t, s, StatMemoryUsed))
	must.Eq(t, int64(61440), intStat(t, s, StatMemoryLimit))
	must.True(t, boolStat(t, s, StatOverLimit))
	must.Eq(t, int64(0), intStat(t, s, StatSMUtilization), must.Sprint("no utilisation samples: NVML said not found"))
	must.Eq(t, int64(0), intStat(t, stats[shareID(g3, 0)], StatMemoryUsed))
}

// TestStats_ProcessOnWrongGPU: a caravan task using a GPU it holds no
// share of counts as unattributed there.
func TestStats_ProcessOnWrongGPU(t *testing.T) {
	f, proc, p := newFingerprinted(t)
	res, err := p.Reserve([]string{shareID(f.uuid(0), 0)})
	must.NoError(t, err)
	proc.setEnv(t, 77, res.Envs)
	f.setProcs(1, []gonvml.ProcessInfo{{Pid: 77, UsedGpuMemory: 2 * gib}}, nil)
	stats := statsFor(t, p.collectStats(), f.uuid(1))
	must.Eq(t, int64(2048), gpuStat(t, stats[shareID(f.uuid(1), 0)], StatGPUMemoryUnattributed))
}

// TestStats_ReservedButIdle: a reserved share with no GPU process yet
// reports its reservation and a zero usage against the reservation limit.
func TestStats_ReservedButIdle(t *testing.T) {
	f := newFakeGPUs(t)
	p := newTestPlugin(t, `config {}`, f.srv, newFakeProc(t))
	p.fingerprintOnce()
	g := f.uuid(4)
	res, err := p.Reserve([]string{shareID(g, 0), shareID(g, 1)})
	must.NoError(t, err)
	stats := statsFor(t, p.collectStats(), g)
	s := stats[shareID(g, 1)]
	must.Eq(t, res.Envs[EnvReservation], *s.Stats.Attributes[StatReservation].StringVal)
	must.Eq(t, int64(0), intStat(t, s, StatMemoryUsed))
	must.Eq(t, int64(40960), intStat(t, s, StatMemoryLimit))
}

// TestStats_GPUFailureMarksUnhealthy: a GPU whose status query fails
// reports the error in its stats and turns unhealthy until it answers.
func TestStats_GPUFailureMarksUnhealthy(t *testing.T) {
	f := newFakeGPUs(t)
	p := newTestPlugin(t, `config {}`, f.srv, nil)
	p.fingerprintOnce()
	g := f.uuid(5)
	f.fail(5, gonvml.ERROR_GPU_IS_LOST)
	stats := statsFor(t, p.collectStats(), g)
	must.StrContains(t, *stats[shareID(g, 0)].Summary.StringVal, "GPU unavailable")
	groups := groupByName(p.fingerprintOnce())
	must.False(t, groups[g].Devices[0].Healthy)
	must.StrContains(t, groups[g].Devices[0].HealthDesc, "NVML query failed")
	must.True(t, groups[f.uuid(4)].Devices[0].Healthy)

	f.fail(5, gonvml.SUCCESS)
	p.collectStats()
	groups = groupByName(p.fingerprintOnce())
	must.True(t, groups[g].Devices[0].Healthy)
	must.Eq(t, "", groups[g].Devices[0].HealthDesc)
}

// TestStats_CachesAttribution: procfs is read once per PID while the PID
// keeps running, and again after it disappears.
func TestStats_CachesAttribution(t *testing.T) {
	f, _, p := newFingerprinted(t)
	f.setProcs(0, []gonvml.ProcessInfo{{Pid: 9, UsedGpuMemory: gib}}, nil)
	p.collectStats()
	must.MapContainsKey(t, p.meter.owners, uint32(9))
	must.Nil(t, p.meter.owners[9], must.Sprint("no environment: not a caravan task"))
	f.setProcs(0, nil, nil)
	p.collectStats()
	must.MapNotContainsKey(t, p.meter.owners, uint32(9))
}

// TestStats_UsageSumsSaturate: a reservation whose processes report more
// memory than uint64 holds reads as over its limit with the most memory,
// not as an idle share (the sum wrapped to 0 before).
func TestStats_UsageSumsSaturate(t *testing.T) {
	f, proc, p := newFingerprinted(t)
	g0 := f.uuid(0)
	res, err := p.Reserve([]string{shareID(g0, 0)})
	must.NoError(t, err)
	proc.setEnv(t, 100, res.Envs)
	proc.setEnv(t, 101, res.Envs)
	f.setProcs(0, []gonvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 63}, {Pid: 101, UsedGpuMemory: 1 << 63}}, nil)

	s := statsFor(t, p.collectStats(), g0)[shareID(g0, 0)]
	must.Eq(t, int64(^uint64(0)>>20), intStat(t, s, StatMemoryUsed))
	must.True(t, boolStat(t, s, StatOverLimit))
	p.metrics.mu.Lock()
	f0 := p.metrics.gpus[0]
	p.metrics.mu.Unlock()
	must.Eq(t, g0, f0.uuid)
	must.Eq(t, ^uint64(0), f0.memReserved)
	must.Eq(t, 1, f0.overLimit)
}
