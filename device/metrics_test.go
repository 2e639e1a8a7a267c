package device

import (
	"io"
	"net/http"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shoenig/test/must"
)

// gathered returns the value of metric name for gpu, and whether it exists.
func gathered(t *testing.T, reg *prometheus.Registry, name, gpu string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	must.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "gpu" && l.GetValue() == gpu {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

func TestMetrics_ShareUsePerGPU(t *testing.T) {
	f, proc, p := newFingerprinted(t)
	g0 := f.uuid(0)
	reserveAB(t, p, proc, g0)
	f.setProcs(0, []gonvml.ProcessInfo{
		{Pid: 100, UsedGpuMemory: 8 * gib},
		{Pid: 200, UsedGpuMemory: 30 * gib},
		{Pid: 300, UsedGpuMemory: 1 * gib},
	}, []gonvml.ProcessUtilizationSample{
		{Pid: 100, TimeStamp: 10, SmUtil: 30},
		{Pid: 200, TimeStamp: 12, SmUtil: 50},
	})
	p.collectStats()

	reg := p.metrics.reg
	want := map[string]float64{
		"caravan_gpu_shares":                        4,
		"caravan_gpu_shares_reserved":               3,
		"caravan_gpu_shares_active":                 3,
		"caravan_gpu_reservations_over_limit":       1,
		"caravan_gpu_memory_reserved_used_bytes":    float64(38 * gib),
		"caravan_gpu_memory_unattributed_bytes":     float64(1 * gib),
		"caravan_gpu_reserved_sm_utilization_ratio": 0.8,
		"caravan_gpu_utilization_ratio":             0.55,
	}
	for name, v := range want {
		got, ok := gathered(t, reg, name, g0)
		must.True(t, ok, must.Sprintf("missing %s", name))
		must.Eq(t, v, got, must.Sprint(name))
	}
	idle, ok := gathered(t, reg, "caravan_gpu_shares_reserved", f.uuid(1))
	must.True(t, ok)
	must.Eq(t, 0.0, idle)

	problems, err := testutil.GatherAndLint(reg)
	must.NoError(t, err)
	for _, pr := range problems {
		if strings.HasPrefix(pr.Metric, "caravan_") {
			t.Errorf("promlint: %s: %s", pr.Metric, pr.Text)
		}
	}
}

func TestMetrics_ServedAtMetricsAddress(t *testing.T) {
	f := newFakeGPUs(t)
	p := newTestPlugin(t, `config { metrics_address = "127.0.0.1:0" }`, f.srv, newFakeProc(t))
	p.fingerprintOnce()
	p.collectStats()
	p.mu.RLock()
	addr := p.metricsServer.Addr()
	p.mu.RUnlock()
	resp, err := http.Get("http://" + addr + "/metrics")
	must.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must.NoError(t, err)
	must.StrContains(t, string(b), `caravan_gpu_shares{gpu="`+f.uuid(0)+`"`)
	must.StrContains(t, string(b), `caravan_gpu_backend_info{backend="nvml"} 1`)
	must.StrContains(t, string(b), "caravan_build_info{")
}

func TestMetrics_AddressMustBeLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:9100", "10.0.0.1:9100", "9100", "127.0.0.1"} {
		t.Run(addr, func(t *testing.T) {
			_, err := parseConfig(&Config{Enabled: true, Backend: BackendNVML, Shares: 4, MetricsAddress: addr})
			must.ErrorIs(t, err, ErrInvalidConfig)
			must.ErrorContains(t, err, "metrics_address")
		})
	}
}
