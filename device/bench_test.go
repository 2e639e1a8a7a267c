//go:build linux

package device

import (
	"fmt"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/shoenig/test/must"
)

// loadedNode is a DGX H100 with `shares` shares per GPU, every share
// reserved (reservations of 4 shares) and procsPerGPU processes per GPU
// spread over those reservations.
func loadedNode(t testing.TB, gpus, shares, procsPerGPU int) (*fakeGPUs, *Plugin) {
	t.Helper()
	f := newFakeGPUs(t)
	f.setVisible(gpus)
	proc := newFakeProc(t)
	p := newTestPlugin(t, fmt.Sprintf(`config { shares = %d }`, shares), f.srv, proc)
	p.fingerprintOnce()
	pid := uint32(1000)
	for i := 0; i < gpus; i++ {
		var envs []map[string]string
		for s := 0; s+4 <= shares || (s == 0 && shares < 4); s += 4 {
			var ids []string
			for j := s; j < min(s+4, shares); j++ {
				ids = append(ids, shareID(f.uuid(i), j))
			}
			res, err := p.Reserve(ids)
			must.NoError(t, err)
			envs = append(envs, res.Envs)
		}
		var procs []gonvml.ProcessInfo
		var samples []gonvml.ProcessUtilizationSample
		for k := 0; k < procsPerGPU; k++ {
			pid++
			proc.setEnv(t, int(pid), envs[k%len(envs)])
			procs = append(procs, gonvml.ProcessInfo{Pid: pid, UsedGpuMemory: uint64(k+1) << 28})
			samples = append(samples, gonvml.ProcessUtilizationSample{Pid: pid, TimeStamp: uint64(k + 1), SmUtil: 5})
		}
		f.setProcs(i, procs, samples)
	}
	return f, p
}

// TestNVMLCallsPerPass: NVML calls per stats pass depend on the number of
// GPUs only: not on shares, nor on processes (all of a GPU's processes
// come from one call each of the process queries).
func TestNVMLCallsPerPass(t *testing.T) {
	callsPerPass := func(gpus, shares, procs int) (stats, fingerprint int) {
		f, p := loadedNode(t, gpus, shares, procs)
		p.collectStats() // warm the attribution cache
		before := f.nvmlCalls()
		resp := p.collectStats()
		must.Len(t, gpus, resp.Groups)
		stats = f.nvmlCalls() - before
		before = f.nvmlCalls()
		must.Len(t, gpus, p.fingerprintOnce())
		return stats, f.nvmlCalls() - before
	}
	base, baseFP := callsPerPass(8, 16, 8)
	must.Eq(t, 8*8, base, must.Sprint("8 NVML calls per GPU per stats pass"))
	must.Eq(t, 3+7*8, baseFP, must.Sprint("3 system calls + 7 per GPU per fingerprint"))

	moreShares, moreSharesFP := callsPerPass(8, 4, 8)
	must.Eq(t, base, moreShares)
	must.Eq(t, baseFP, moreSharesFP)

	moreProcs, _ := callsPerPass(8, 16, 32)
	must.Eq(t, base, moreProcs)

	fewerGPUs, fewerGPUsFP := callsPerPass(4, 16, 8)
	must.Eq(t, 4*8, fewerGPUs)
	must.Eq(t, 3+7*4, fewerGPUsFP)
}

// BenchmarkStatsPass: one metering pass over 8 GPUs x 16 shares with 64
// processes (8 per GPU), all attributed. The mock records every call it
// receives, which adds a little to allocs/op.
func BenchmarkStatsPass(b *testing.B) {
	_, p := loadedNode(b, 8, 16, 8)
	resp := p.collectStats()
	must.Len(b, 8, resp.Groups)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p.collectStats()
	}
}

// BenchmarkFingerprintPass: one fingerprint pass over 8 GPUs x 16 shares.
func BenchmarkFingerprintPass(b *testing.B) {
	_, p := loadedNode(b, 8, 16, 8)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p.fingerprintOnce()
	}
}
