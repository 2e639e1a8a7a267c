package trainer

import "fmt"

// GradStats accumulates Pollux's gradient statistics (AdaptDL's gradient
// noise scale) from micro-shard gradients. Every micro-shard gradient g_k is
// the sum over its n_k samples, so m_k = g_k/n_k is an unbiased estimate of
// the true gradient mu with E||m_k||^2 = ||mu||^2 + sigma^2/n_k (sigma^2 the
// trace of the per-sample gradient covariance). Pairs of distinct
// micro-shards give AdaptDL's unbiased estimate of ||mu||^2:
// E<m_k, m_l> = ||mu||^2 for k != l.
//
// Only pairs computed in one process are used: with the model sharded over
// parameter servers no process holds the micro-shard gradients of two
// workers. A single process (or one worker holding every micro-shard) uses
// every pair, which is exactly AdaptDL's (count*total_sqr - local_sqr) /
// (count - 1). The statistics are read-only on the gradients: parameters
// stay bit-for-bit the same.
type GradStats struct {
	Dot     float64 // sum over ordered pairs k != l of <m_k, m_l>
	Pairs   float64 // number of such ordered pairs
	SqrN    float64 // sum over shards of n_k ||m_k||^2
	Samples float64 // sum over shards of n_k
	Shards  float64 // micro-shards added
}

// gradGroup collects the micro-shards one process computed in one step.
type gradGroup struct {
	sum          []float64 // sum of m_k
	sqr          float64   // sum of ||m_k||^2
	sqrN, n, cnt float64
}

// add takes one micro-shard's summed gradient over n samples.
func (g *gradGroup) add(grad []float64, n int) {
	if n <= 0 {
		return
	}
	if len(g.sum) != len(grad) {
		g.sum = make([]float64, len(grad))
	}
	inv := 1 / float64(n)
	norm := 0.0
	for i, v := range grad {
		m := v * inv
		g.sum[i] += m
		norm += m * m
	}
	g.sqr += norm
	g.sqrN += float64(n) * norm
	g.n += float64(n)
	g.cnt++
}

// close adds the group's pairs to s and empties the group.
func (g *gradGroup) close(s *GradStats) {
	if g.cnt > 0 {
		total := 0.0
		for i, v := range g.sum {
			total += v * v
			g.sum[i] = 0
		}
		s.Dot += total - g.sqr
		s.Pairs += g.cnt * (g.cnt - 1)
		s.SqrN += g.sqrN
		s.Samples += g.n
		s.Shards += g.cnt
	}
	g.sqr, g.sqrN, g.n, g.cnt = 0, 0, 0, 0
}

// Add merges o into s.
func (s *GradStats) Add(o GradStats) {
	s.Dot += o.Dot
	s.Pairs += o.Pairs
	s.SqrN += o.SqrN
	s.Samples += o.Samples
	s.Shards += o.Shards
}

// Estimate returns grad_sqr (the squared norm of the true gradient) and
// grad_var (the variance of the gradient estimate at global batch batch:
// sigma^2/batch, AdaptDL's grad_var at the job's initial batch, which this
// trainer never changes). ok is false before any pair was seen. Noise can
// make either estimate negative; both are clamped at 0.
func (s GradStats) Estimate(batch int) (sqr, variance float64, ok bool) {
	if s.Pairs <= 0 || s.Shards <= 0 || batch <= 0 {
		return 0, 0, false
	}
	sqr = s.Dot / s.Pairs
	sigma2 := (s.SqrN - sqr*s.Samples) / s.Shards
	return max(sqr, 0), max(sigma2, 0) / float64(batch), true
}

// gradFields is the statistics' part of a progress log line (empty without
// an estimate), which the zero-code relay parses as it parses the rest.
func gradFields(sqr, variance float64, ok bool) string {
	if !ok {
		return ""
	}
	return fmt.Sprintf(" grad_sqr=%.6g grad_var=%.6g", sqr, variance)
}
