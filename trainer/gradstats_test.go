package trainer

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shoenig/test/must"
)

// TestGradStats_AllPairsIsAdaptDL: one group holding every micro-shard gives
// AdaptDL's estimates, grad_sqr = (K*||mean||^2 - mean_k ||m_k||^2)/(K-1).
func TestGradStats_AllPairsIsAdaptDL(t *testing.T) {
	grads := [][]float64{{2, 4}, {6, 0}, {1, 1}, {3, 7}} // sums over 2 samples each
	var g gradGroup
	var s GradStats
	for _, gr := range grads {
		g.add(gr, 2)
	}
	g.close(&s)
	k := float64(len(grads))
	mean, local := []float64{0, 0}, 0.0
	for _, gr := range grads {
		m := []float64{gr[0] / 2, gr[1] / 2}
		mean[0], mean[1] = mean[0]+m[0]/k, mean[1]+m[1]/k
		local += (m[0]*m[0] + m[1]*m[1]) / k
	}
	total := mean[0]*mean[0] + mean[1]*mean[1]
	wantSqr := (k*total - local) / (k - 1)
	wantVar := (local - total) / (k - 1) // variance of the mean gradient at batch K*2
	sqr, v, ok := s.Estimate(8)
	must.True(t, ok)
	must.True(t, math.Abs(sqr-wantSqr) < 1e-12, must.Sprintf("grad_sqr %v want %v", sqr, wantSqr))
	must.True(t, math.Abs(v-wantVar) < 1e-12, must.Sprintf("grad_var %v want %v", v, wantVar))
}

// TestGradStats_RecoversNoise: per-sample gradients mu + noise of known
// variance, computed by workers holding two or more micro-shards each.
func TestGradStats_RecoversNoise(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	mu := []float64{0.5, -0.25, 1}
	const sigma, n, batch = 2.0, 4, 32 // per-coordinate sd, samples per shard
	var s GradStats
	for step := 0; step < 4000; step++ {
		for _, shards := range []int{3, 3, 2} { // three workers, 8 shards
			var g gradGroup
			for range shards {
				sum := make([]float64, len(mu))
				for range n {
					for i := range sum {
						sum[i] += mu[i] + sigma*r.NormFloat64()
					}
				}
				g.add(sum, n)
			}
			g.close(&s)
		}
	}
	sqr, v, ok := s.Estimate(batch)
	must.True(t, ok)
	wantSqr := 0.5*0.5 + 0.25*0.25 + 1
	wantVar := 3 * sigma * sigma / batch
	must.True(t, math.Abs(sqr-wantSqr) < 0.05*wantSqr, must.Sprintf("grad_sqr %v want %v", sqr, wantSqr))
	must.True(t, math.Abs(v-wantVar) < 0.05*wantVar, must.Sprintf("grad_var %v want %v", v, wantVar))
}

func TestGradStats_NoPairsNoEstimate(t *testing.T) {
	var g gradGroup
	var s GradStats
	g.add([]float64{1, 2}, 4)
	g.close(&s)
	_, _, ok := s.Estimate(4)
	must.False(t, ok)
}

// TestRun_ReportsGradStats: the single-process trainer reports gradient
// statistics over all pairs of its micro-shards.
func TestRun_ReportsGradStats(t *testing.T) {
	c := DefaultConfig()
	c.Samples, c.Steps, c.LogEvery = 512, 20, 10
	rec := &recorder{}
	res, err := Run(t.Context(), c, Options{Reporter: rec})
	must.NoError(t, err)
	must.Eq(t, uint64(20), res.Step)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	must.SliceNotEmpty(t, rec.got)
	last := rec.got[len(rec.got)-1]
	must.Positive(t, last.GradSqr)
	must.Positive(t, last.GradVar)
}
