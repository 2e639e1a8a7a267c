package device

import (
	"testing"

	"github.com/caravan-nomad/caravan/device/nvml"
	"github.com/caravan-nomad/caravan/device/simulated"
)

// FuzzParseConfig: any plugin config is refused with an error, or yields an
// inventory whose every GPU has 1 to max_shares shares of at least 1 MiB;
// never a panic or a huge allocation.
func FuzzParseConfig(f *testing.F) {
	f.Add(4, 0, "model:A100", 8, "1m", int64(40960), "MIG-1g.5gb", int64(4864))
	f.Add(1<<62, 0, "index:0", 2000000, "", int64(512), "", int64(0))
	f.Add(1000, 1024, "uuid:GPU-x", 1, "-1s", int64(1)<<40, "p", int64(1)<<60)
	f.Fuzz(func(t *testing.T, shares, maxShares int, gpu string, ovShares int, period string, memMiB int64, mig string, migMiB int64) {
		c := &Config{
			Enabled: true, Backend: BackendSimulated, Shares: shares, MaxShares: maxShares, FingerprintPeriod: period,
			ShareOverrides: []ShareOverride{{GPU: gpu, Shares: ovShares}},
			Simulated:      &simulated.Block{GPUs: []simulated.GPUBlock{{Model: "A100", MemoryMiB: memMiB}}},
		}
		if mig != "" {
			c.Simulated.GPUs[0].MIG = []simulated.MIGBlock{{Profile: mig, MemoryMiB: migMiB}}
		}
		s, err := parseConfig(c)
		if err != nil {
			return
		}
		limit := maxShares
		if limit == 0 {
			limit = defaultMaxShares
		}
		inv := buildInventory(s, nvml.System{}, simulated.Describe(s.simulated), nil)
		for _, e := range inv.entries() {
			if e.shares < 1 || e.shares > limit || e.memoryPerShare < minShareBytes || len(e.ids) != e.shares {
				t.Fatalf("GPU %s: %d shares of %d bytes (max_shares %d)", e.gpu.UUID, e.shares, e.memoryPerShare, limit)
			}
		}
	})
}
