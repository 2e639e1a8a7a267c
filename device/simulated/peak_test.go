package simulated

import (
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

// TestClient_PeakMemoryClaim: a task's stated peak is reported as its
// process's peak (never below its current use); a bad claim is refused
// with a warning naming the variable, and no peak is reported.
func TestClient_PeakMemoryClaim(t *testing.T) {
	cases := []struct {
		name, env string
		want      uint64
		warn      string
	}{
		{"peak above use", EnvPeakMemoryMiB + "=9000", 9000 << 20, ""},
		{"peak below use reads as the use", EnvPeakMemoryMiB + "=100", 3000 << 20, ""},
		{"no claim: no peak", "PATH=/bin", 0, ""},
		{"beyond 16 TiB", EnvPeakMemoryMiB + "=17592186044416", 0, EnvPeakMemoryMiB + "=17592186044416"},
		{"negative", EnvPeakMemoryMiB + "=-5", 0, EnvPeakMemoryMiB + `=\"-5\"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			cfg := twoGPUs()
			cfg.ProcRoot = t.TempDir()
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
			c := New(cfg)
			g0 := Describe(cfg)[0].UUID
			writeEnv(t, cfg.ProcRoot, 100, "CARAVAN_GPU_RESERVATION=r1", "CUDA_VISIBLE_DEVICES="+g0, EnvMemoryMiB+"=3000", tc.env)
			st, err := c.Status(g0, 0)
			must.NoError(t, err)
			must.Len(t, 1, st.Processes)
			must.Eq(t, uint64(3000<<20), st.Processes[0].UsedMemoryBytes)
			must.Eq(t, tc.want, st.Processes[0].PeakMemoryBytes)
			if tc.warn == "" {
				must.Eq(t, "", logs.String())
				return
			}
			must.StrContains(t, logs.String(), tc.warn)
		})
	}
}
