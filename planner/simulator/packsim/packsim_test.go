package packsim

import (
	"math"
	"testing"

	"github.com/shoenig/test/must"
)

// TestModel_CalibratedToTheH100 pins the interference model to the figures
// it is calibrated against (device/README.md, two copies of one job: CPU
// bound 2.01x time-sliced, 1.96x MPS; GPU bound 0.91x, 1.13x with half the
// SMs each) and to Big Brain's linear slowdown.
func TestModel_CalibratedToTheH100(t *testing.T) {
	cases := []struct {
		name   string
		mps    bool
		c      float64
		shares int
		want   float64
	}{
		{"cpu-bound pair, time-sliced", false, 0.05, 2, 2.00}, // measured 2.01: the model caps a job at its solo speed
		{"cpu-bound pair, MPS", true, 0.05, 2, 1.96},
		{"gpu-bound pair, time-sliced", false, 1, 2, 0.91},
		{"gpu-bound pair, MPS halves", true, 1, 2, 1.13},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.InDelta(t, tc.want, PairGain(tc.mps, 4, tc.c, tc.c, tc.shares, tc.shares), 0.005)
		})
	}
	// Big Brain: once saturated, time grows linearly with the concurrency factor k.
	time := func(k int) float64 {
		res := make([]resident, k)
		for i := range res {
			res[i] = resident{compute: 0.5, shares: 1}
		}
		return 1 / workerRates(false, 4, res, nil)[0]
	}
	must.InDelta(t, 1.0, time(2), 1e-9)                     // D = 1: the sweet spot, no slowdown
	must.InDelta(t, time(6)-time(5), time(5)-time(4), 1e-9) // linear once k x c >= 2
	must.InDelta(t, 0.5/0.91, time(5)-time(4), 1e-9)
}

func TestMix_FixedSyntheticAndReproducible(t *testing.T) {
	base, err := MixNamed("base")
	must.NoError(t, err)
	_, err = MixNamed("nope")
	must.ErrorContains(t, err, `unknown profile mix "nope"`)
	must.Eq(t, base.Draw(7, 3, 4), base.Draw(7, 3, 4))
	must.NotEq(t, base.Draw(7, 3, 4), base.Draw(8, 3, 4))
	n, light, sum := 20000, 0, 0.0
	for i := 0; i < n; i++ {
		p := base.Draw(1, i, 4)
		must.True(t, p.Synthetic)
		must.Between(t, NeedShares(p.Memory, 4), p.Declared, 4)
		sum += p.Compute
		if p.Compute < 0.15 {
			light++
		}
	}
	// the published figures the base mix was fixed from: a third of jobs
	// below 15% (Big Brain), a mean near half a GPU (Philly)
	must.InDelta(t, 1.0/3, float64(light)/float64(n), 0.02)
	must.InDelta(t, 0.47, sum/float64(n), 0.02)
	gb, _ := MixNamed("gpu-bound")
	for i := 0; i < 100; i++ {
		must.GreaterEq(t, 0.9, gb.Draw(1, i, 4).Compute)
	}
}

// pair is two one-worker jobs arriving together, each of compute c, on a
// cluster of gpus GPUs, declaring 2 shares.
func pair(c float64, work float64) []Spec {
	p := Profile{Compute: c, Memory: 0.2, Declared: 2, Synthetic: true}
	return []Spec{
		{ID: "a", Submit: 0, Workers: 1, Work: work, Profile: p},
		{ID: "b", Submit: 0, Workers: 1, Work: work, Profile: p},
		{ID: "c", Submit: 0, Workers: 1, Work: work, Profile: p},
	}
}

func TestRun_Policies(t *testing.T) {
	cases := []struct {
		name     string
		pol      Policy
		c        float64
		packs    int
		unpacked bool
	}{
		{"whole GPUs never pack", WholeGPU, 0.05, 0, false},
		{"static packs a gpu-bound pair and keeps it", Static, 1, 1, false},
		{"introspective keeps a cpu-bound pair packed", Introspective, 0.05, 1, false},
		{"introspective unpacks a gpu-bound pair", Introspective, 1, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// 2 GPUs, 3 jobs: one waits unless two share a GPU
			r, err := Run(Config{GPUs: 2}, tc.pol, pair(tc.c, 3600))
			must.NoError(t, err)
			must.Eq(t, 3, len(r.JCTs))
			must.Eq(t, tc.packs, r.Packs)
			must.Eq(t, tc.unpacked, r.Unpacks > 0)
			again, _ := Run(Config{GPUs: 2}, tc.pol, pair(tc.c, 3600))
			must.Eq(t, r.AvgJCT, again.AvgJCT)
		})
	}
}

// TestRun_BadPairUnpackedWithinThreeRounds: the introspective policy's
// gpu-bound pair runs packed for no more than the rounds it takes to
// measure it (the slow-job count stays at zero), and a cpu-bound pair is
// faster packed than whole GPUs queueing.
func TestRun_BadPairUnpackedWithinThreeRounds(t *testing.T) {
	r, err := Run(Config{GPUs: 2}, Introspective, pair(1, 3600))
	must.NoError(t, err)
	must.Eq(t, 0, r.Slow)
	st, err := Run(Config{GPUs: 2}, Static, pair(1, 3600))
	must.NoError(t, err)
	must.Positive(t, st.Slow)
	good, _ := Run(Config{GPUs: 2}, Introspective, pair(0.05, 3600))
	whole, _ := Run(Config{GPUs: 2}, WholeGPU, pair(0.05, 3600))
	must.Less(t, whole.AvgJCT, good.AvgJCT)
}

func TestRun_NeverIsNeverPacked(t *testing.T) {
	specs := pair(0.05, 3600)
	for i := range specs {
		specs[i].Never = true
	}
	for _, p := range []Policy{WholeGPU, Introspective} {
		r, err := Run(Config{GPUs: 2}, p, specs)
		must.NoError(t, err)
		must.Eq(t, 0, r.Packs)
	}
}

func TestRun_BadInput(t *testing.T) {
	_, err := Run(Config{GPUs: 1}, Static, []Spec{{ID: "x", Workers: 2, Work: 1, Profile: Profile{Declared: 1}}})
	must.ErrorIs(t, err, ErrStuck)
	_, err = Run(Config{GPUs: 1}, Static, []Spec{{ID: "x", Workers: 1, Work: 1, Profile: Profile{Declared: 9}}})
	must.ErrorContains(t, err, "job x: workers 1, declared shares 9")
	_, err = Run(Config{}, Static, nil)
	must.ErrorContains(t, err, "gpus 0")
}

func TestMerge(t *testing.T) {
	a := Result{Jobs: 1, JCTs: []float64{10}, Makespan: 100, UtilAll: 0.5, UtilWait: 0.2, waitTime: 10, Slow: 1}
	b := Result{Jobs: 3, JCTs: []float64{20, 30, 40}, Makespan: 300, UtilAll: 0.1, UtilWait: 0.6, waitTime: 30, Slow: 2}
	m := Merge([]Result{a, b})
	must.Eq(t, 4, m.Jobs)
	must.InDelta(t, 25, m.AvgJCT, 1e-9)
	must.InDelta(t, (0.5*100+0.1*300)/400, m.UtilAll, 1e-9)
	must.InDelta(t, (0.2*10+0.6*30)/40, m.UtilWait, 1e-9)
	must.Eq(t, 3, m.Slow)
	must.True(t, math.IsNaN(Row{By: map[Policy]Result{}}.UtilVsWhole()))
}
