//go:build linux

package device

import (
	"context"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	log "github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/device/nvml"
	"github.com/caravan-nomad/caravan/device/simulated"
)

// TestStats_MemoryPeakIsAHighWaterMark: a reservation's memory_peak is the
// most its processes used in any stats pass, kept after its use falls and
// while it holds its shares with no process; a reservation that ended is
// forgotten.
func TestStats_MemoryPeakIsAHighWaterMark(t *testing.T) {
	f, proc, p := newFingerprinted(t)
	g := f.uuid(0)
	res, err := p.Reserve([]string{shareID(g, 0), shareID(g, 1)})
	must.NoError(t, err)
	proc.setEnv(t, 100, res.Envs)
	proc.setEnv(t, 101, res.Envs)
	share := shareID(g, 1)

	f.setProcs(0, []gonvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 8 * gib}, {Pid: 101, UsedGpuMemory: 4 * gib}}, nil)
	s := statsFor(t, p.collectStats(), g)[share]
	must.Eq(t, int64(12288), intStat(t, s, StatMemoryPeak))

	f.setProcs(0, []gonvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 2 * gib}}, nil)
	s = statsFor(t, p.collectStats(), g)[share]
	must.Eq(t, int64(2048), intStat(t, s, StatMemoryUsed))
	must.Eq(t, int64(12288), intStat(t, s, StatMemoryPeak))
	must.Eq(t, int64(2*20480), *s.Stats.Attributes[StatMemoryPeak].IntDenominatorVal)

	// Reserved, no process now: the mark stays.
	f.setProcs(0, nil, nil)
	s = statsFor(t, p.collectStats(), g)[share]
	must.Eq(t, int64(0), intStat(t, s, StatMemoryUsed))
	must.Eq(t, int64(12288), intStat(t, s, StatMemoryPeak))

	// A share never reserved reports no peak.
	must.Eq(t, int64(0), intStat(t, statsFor(t, p.collectStats(), g)[shareID(g, 3)], StatMemoryPeak))

	// A reservation the plugin no longer remembers, with no process, is
	// forgotten.
	p.reservations = newReservations()
	p.collectStats()
	must.Eq(t, uint64(0), p.meter.peak(res.Envs[EnvReservation], g))
}

// TestStats_SimulatedPeakBetweenSamples: on the simulated backend, a task
// that states a peak above its current use (a spike between samples) has
// that peak reported as its reservation's memory_peak.
func TestStats_SimulatedPeakBetweenSamples(t *testing.T) {
	proc := newFakeProc(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := NewPlugin(ctx, log.NewNullLogger())
	p.procRoot = proc.root
	p.open = func(s *settings) (nvml.Client, error) {
		cfg := s.simulated
		cfg.ProcRoot = proc.root
		return simulated.New(cfg), nil
	}
	c, err := pluginConfig(t, `config {
		backend = "simulated"
		shares  = 4
		simulated {
			gpu {
				model      = "A100"
				memory_mib = 40960
			}
		}
	}`)
	must.NoError(t, err)
	must.NoError(t, p.SetConfig(c))
	t.Cleanup(p.Shutdown)
	p.fingerprintOnce()
	st, _, _ := p.state()
	g := simulated.Describe(st.simulated)[0].UUID
	res, err := p.Reserve([]string{shareID(g, 0)})
	must.NoError(t, err)
	env := map[string]string{simulated.EnvMemoryMiB: "2000", simulated.EnvPeakMemoryMiB: "9000"}
	for k, v := range res.Envs {
		env[k] = v
	}
	proc.setEnv(t, 100, env)
	s := statsFor(t, p.collectStats(), g)[shareID(g, 0)]
	must.Eq(t, int64(2000), intStat(t, s, StatMemoryUsed))
	must.Eq(t, int64(9000), intStat(t, s, StatMemoryPeak))
}
