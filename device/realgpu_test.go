//go:build linux && cgo

package device

// Probes of the real NVML backend on a host with an NVIDIA GPU. They are
// skipped unless CARAVAN_REAL_GPU_DIR names a directory to write their
// findings into (CI has no GPU); scripts/gpu-check.sh drives them on a lent
// GPU machine, starting the CUDA processes they meter. What they saw is
// recorded in device/README.md ("Verified on real hardware").

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	log "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/device/nvml"
)

const envRealGPUDir = "CARAVAN_REAL_GPU_DIR"

// realGPUDir is where a real-GPU probe writes; it skips without one.
func realGPUDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(envRealGPUDir)
	if dir == "" {
		t.Skipf("$%s not set: no real GPU probe", envRealGPUDir)
	}
	must.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// countingLib counts the NVML calls the adapter makes on the real library.
type countingLib struct {
	gonvml.Interface
	calls *atomic.Int64
}

func (l countingLib) Init() gonvml.Return { l.calls.Add(1); return l.Interface.Init() }
func (l countingLib) DeviceGetCount() (int, gonvml.Return) {
	l.calls.Add(1)
	return l.Interface.DeviceGetCount()
}
func (l countingLib) SystemGetDriverVersion() (string, gonvml.Return) {
	l.calls.Add(1)
	return l.Interface.SystemGetDriverVersion()
}
func (l countingLib) SystemGetCudaDriverVersion() (int, gonvml.Return) {
	l.calls.Add(1)
	return l.Interface.SystemGetCudaDriverVersion()
}
func (l countingLib) DeviceGetHandleByIndex(i int) (gonvml.Device, gonvml.Return) {
	l.calls.Add(1)
	d, ret := l.Interface.DeviceGetHandleByIndex(i)
	return countingDevice{d, l.calls}, ret
}
func (l countingLib) DeviceGetHandleByUUID(u string) (gonvml.Device, gonvml.Return) {
	l.calls.Add(1)
	d, ret := l.Interface.DeviceGetHandleByUUID(u)
	return countingDevice{d, l.calls}, ret
}

// countingDevice counts every Device method the adapter calls.
type countingDevice struct {
	gonvml.Device
	calls *atomic.Int64
}

func (d countingDevice) GetUUID() (string, gonvml.Return) { d.calls.Add(1); return d.Device.GetUUID() }
func (d countingDevice) GetName() (string, gonvml.Return) { d.calls.Add(1); return d.Device.GetName() }
func (d countingDevice) GetMemoryInfo() (gonvml.Memory, gonvml.Return) {
	d.calls.Add(1)
	return d.Device.GetMemoryInfo()
}
func (d countingDevice) GetPciInfo() (gonvml.PciInfo, gonvml.Return) {
	d.calls.Add(1)
	return d.Device.GetPciInfo()
}
func (d countingDevice) GetCudaComputeCapability() (int, int, gonvml.Return) {
	d.calls.Add(1)
	return d.Device.GetCudaComputeCapability()
}
func (d countingDevice) GetMigMode() (int, int, gonvml.Return) {
	d.calls.Add(1)
	return d.Device.GetMigMode()
}
func (d countingDevice) GetUtilizationRates() (gonvml.Utilization, gonvml.Return) {
	d.calls.Add(1)
	return d.Device.GetUtilizationRates()
}
func (d countingDevice) GetPowerUsage() (uint32, gonvml.Return) {
	d.calls.Add(1)
	return d.Device.GetPowerUsage()
}
func (d countingDevice) GetTemperature(s gonvml.TemperatureSensors) (uint32, gonvml.Return) {
	d.calls.Add(1)
	return d.Device.GetTemperature(s)
}
func (d countingDevice) GetTotalEccErrors(e gonvml.MemoryErrorType, c gonvml.EccCounterType) (uint64, gonvml.Return) {
	d.calls.Add(1)
	return d.Device.GetTotalEccErrors(e, c)
}
func (d countingDevice) GetComputeRunningProcesses() ([]gonvml.ProcessInfo, gonvml.Return) {
	d.calls.Add(1)
	return d.Device.GetComputeRunningProcesses()
}
func (d countingDevice) GetMPSComputeRunningProcesses() ([]gonvml.ProcessInfo, gonvml.Return) {
	d.calls.Add(1)
	return d.Device.GetMPSComputeRunningProcesses()
}
func (d countingDevice) GetProcessUtilization(since uint64) ([]gonvml.ProcessUtilizationSample, gonvml.Return) {
	d.calls.Add(1)
	return d.Device.GetProcessUtilization(since)
}

// newRealPlugin configures a plugin over the host's libnvidia-ml, counting
// NVML calls.
func newRealPlugin(t *testing.T, cfg string) (*Plugin, *atomic.Int64) {
	t.Helper()
	calls := &atomic.Int64{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := NewPlugin(ctx, log.New(&log.LoggerOptions{Level: log.Info, Output: os.Stderr}))
	p.open = func(*settings) (nvml.Client, error) {
		return nvml.NewAdapter(countingLib{gonvml.New(), calls})
	}
	c, err := pluginConfig(t, cfg)
	must.NoError(t, err)
	must.NoError(t, p.SetConfig(c))
	t.Cleanup(p.Shutdown)
	return p, calls
}

const realGPUConfig = `config {
	shares = 4
	mps {
		enabled = true
	}
}`

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	must.NoError(t, err)
	must.NoError(t, os.WriteFile(path, b, 0o644))
}

// writeEnvFile writes a reservation's environment as shell exports.
func writeEnvFile(t *testing.T, path string, env map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s='%s'\n", k, env[k])
	}
	must.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
}

func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	must.NoError(t, err)
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if ok {
			env[k] = strings.Trim(v, "'")
		}
	}
	return env
}

// TestRealGPU_FingerprintAndReserve writes the fingerprint (to compare with
// nvidia-smi -q) and the environments of reservations of 1, N/2 and N
// shares of GPU 0, plus A (share 0), B (shares 1-2) and the MPS halves
// (shares 0-1, 2-3) that the script's CUDA processes run under.
func TestRealGPU_FingerprintAndReserve(t *testing.T) {
	dir := realGPUDir(t)
	p, calls := newRealPlugin(t, realGPUConfig)
	before := calls.Load()
	groups := p.fingerprintOnce()
	fpCalls := calls.Load() - before
	must.SliceNotEmpty(t, groups)
	type group struct {
		Name       string
		Attributes map[string]string
		Instances  []string
		Healthy    []bool
	}
	out := struct {
		NVMLCalls int64
		Groups    []group
	}{NVMLCalls: fpCalls}
	for _, g := range groups {
		gg := group{Name: g.Name, Attributes: map[string]string{}}
		for k, a := range g.Attributes {
			gg.Attributes[k] = a.GoString()
		}
		for _, d := range g.Devices {
			gg.Instances = append(gg.Instances, d.ID)
			gg.Healthy = append(gg.Healthy, d.Healthy)
		}
		out.Groups = append(out.Groups, gg)
	}
	writeJSON(t, filepath.Join(dir, "fingerprint.json"), out)

	g0 := groups[0]
	n := len(g0.Devices)
	reserve := func(name string, idx ...int) {
		ids := make([]string, 0, len(idx))
		for _, i := range idx {
			ids = append(ids, shareID(g0.Name, i))
		}
		res, err := p.Reserve(ids)
		must.NoError(t, err)
		writeEnvFile(t, filepath.Join(dir, name+".env"), res.Envs)
	}
	for _, k := range []int{1, n / 2, n} {
		idx := make([]int, k)
		for i := range idx {
			idx[i] = i
		}
		reserve(fmt.Sprintf("reserve-%d", k), idx...)
	}
	reserve("resA", 0)
	reserve("resB", 1, 2)
	reserve("mpsA", 0, 1)
	reserve("mpsB", 2, 3)
}

// shareReport is one share's stats as the plugin reports them.
type shareReport struct {
	Share          string
	Reservation    string
	Processes      int64
	MemoryUsedMiB  int64
	MemoryLimitMiB int64
	SMPercent      int64
	OverLimit      bool
}

func reportShares(resp *device.StatsResponse, uuid string) []shareReport {
	var out []shareReport
	for _, g := range resp.Groups {
		if g.Name != uuid {
			continue
		}
		for id, s := range g.InstanceStats {
			a := s.Stats.Attributes
			r := shareReport{Share: id}
			if v := a[StatReservation]; v != nil {
				r.Reservation = *v.StringVal
			}
			if v := a[StatProcesses]; v != nil {
				r.Processes = *v.IntNumeratorVal
			}
			if v := a[StatMemoryUsed]; v != nil {
				r.MemoryUsedMiB, r.MemoryLimitMiB = *v.IntNumeratorVal, *v.IntDenominatorVal
			}
			if v := a[StatSMUtilization]; v != nil {
				r.SMPercent = *v.IntNumeratorVal
			}
			if v := a[StatOverLimit]; v != nil {
				r.OverLimit = *v.BoolVal
			}
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Share < out[j].Share })
	return out
}

// TestRealGPU_Stats meters the CUDA processes the script started under the
// reservations named in CARAVAN_REAL_GPU_EXPECT (env files written by
// TestRealGPU_FingerprintAndReserve): every share of each must show its
// token and its processes. It records NVML's raw process list, the calls
// and the time of one pass (CARAVAN_REAL_GPU_LABEL names the output).
func TestRealGPU_Stats(t *testing.T) {
	dir := realGPUDir(t)
	label := os.Getenv("CARAVAN_REAL_GPU_LABEL")
	p, calls := newRealPlugin(t, realGPUConfig)
	groups := p.fingerprintOnce()
	must.SliceNotEmpty(t, groups)
	uuid := groups[0].Name

	type expect struct {
		name, token string
		shares      []string
	}
	var expected []expect
	for _, name := range strings.Split(os.Getenv("CARAVAN_REAL_GPU_EXPECT"), ",") {
		if name == "" {
			continue
		}
		env := readEnvFile(t, filepath.Join(dir, name+".env"))
		expected = append(expected, expect{name, env[EnvReservation], strings.Split(env[EnvShareIDs], ",")})
	}

	var resp *device.StatsResponse
	attributed := func() error {
		resp = p.collectStats()
		byShare := map[string]shareReport{}
		for _, r := range reportShares(resp, uuid) {
			byShare[r.Share] = r
		}
		for _, e := range expected {
			for _, id := range e.shares {
				r := byShare[id]
				if r.Reservation != e.token || r.Processes < 1 || r.MemoryUsedMiB == 0 {
					return fmt.Errorf("%s: share %s reports %+v", e.name, id, r)
				}
			}
		}
		return nil
	}
	must.Wait(t, wait.InitialSuccess(wait.ErrorFunc(attributed), wait.Timeout(30*time.Second), wait.Gap(time.Second)))

	_, client, _ := p.state()
	raw, err := client.Status(uuid, 0)
	must.NoError(t, err)

	before := calls.Load()
	p.collectStats()
	perPass := calls.Load() - before
	const passes = 50
	start := time.Now()
	for range passes {
		resp = p.collectStats()
	}
	elapsed := time.Since(start) / passes

	back2back := reportShares(resp, uuid)
	// Nomad collects once a second or less often: NVML samples process
	// utilisation about every 1/6 s, so back-to-back passes see none.
	time.Sleep(time.Second)
	resp = p.collectStats()

	var procBytes uint64
	for _, proc := range raw.Processes {
		procBytes += proc.UsedMemoryBytes
	}
	writeJSON(t, filepath.Join(dir, "stats-"+label+".json"), map[string]any{
		"nvml_calls_per_pass":    perPass,
		"pass_time":              elapsed.String(),
		"raw_processes":          raw.Processes,
		"gpu_memory_used_mib":    raw.MemoryUsedBytes >> 20,
		"process_memory_sum_mib": procBytes >> 20,
		"shares_back_to_back":    back2back,
		"shares_after_1s":        reportShares(resp, uuid),
	})
	t.Logf("%s: %d NVML calls and %s per pass; raw processes %+v", label, perPass, elapsed, raw.Processes)
	must.Eq(t, int64(8*len(groups)), perPass, must.Sprint("8 NVML calls per GPU per pass"))
	must.LessEq(t, raw.MemoryUsedBytes, procBytes, must.Sprint("processes cannot use more than the GPU has in use"))
}

// TestRealGPU_XidWatch starts the Xid event loop on the real devices (the
// plugin's, through Fingerprint, and the adapter's directly) and stops it:
// the event channel must close within one wait period of the cancel.
func TestRealGPU_XidWatch(t *testing.T) {
	dir := realGPUDir(t)
	p, _ := newRealPlugin(t, realGPUConfig)
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := p.Fingerprint(ctx)
	must.NoError(t, err)
	fp := <-ch
	must.NoError(t, fp.Error)
	p.mu.RLock()
	watching := p.xidCancel != nil
	p.mu.RUnlock()
	must.True(t, watching, must.Sprint("the plugin's Xid watch registered on the real GPU"))
	cancel()

	a, err := nvml.New()
	must.NoError(t, err)
	defer a.Close()
	_, err = a.GPUs()
	must.NoError(t, err)
	wctx, wcancel := context.WithCancel(t.Context())
	events, err := a.WatchXid(wctx)
	must.NoError(t, err)
	var got []nvml.XidEvent
	idle := time.After(2500 * time.Millisecond)
	for waiting := true; waiting; {
		select {
		case ev, ok := <-events:
			must.True(t, ok, must.Sprint("the Xid channel closed before the cancel"))
			got = append(got, ev)
		case <-idle:
			waiting = false
		}
	}
	stop := time.Now()
	wcancel()
	for ev := range events {
		got = append(got, ev)
	}
	stopped := time.Since(stop)
	writeJSON(t, filepath.Join(dir, "xid.json"), map[string]any{
		"events_in_2_5s": got,
		"stop_time":      stopped.String(),
	})
	must.Less(t, 3*time.Second, stopped, must.Sprint("the loop notices the cancel within one wait"))
}
