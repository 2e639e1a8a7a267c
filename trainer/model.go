package trainer

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
)

// Model is a one-hidden-layer MLP (tanh hidden, sigmoid output) trained with
// binary cross-entropy. Params and Velocity share one flat layout:
// W1[hidden*features] | b1[hidden] | w2[hidden] | b2.
type Model struct {
	Features, Hidden int
	Params           []float64
	Velocity         []float64

	// Stats accumulates the gradient statistics of the steps taken since
	// the caller last reset it.
	Stats GradStats

	scratch *Scratch  // gradient buffers
	sum     []float64 // reduced gradient
	group   gradGroup
}

// NewModel returns the initial model of c (deterministic in c.Seed).
func NewModel(c Config) *Model {
	n := ParamCount(c)
	m := &Model{Features: c.Features, Hidden: c.Hidden, Params: make([]float64, n), Velocity: make([]float64, n)}
	s1 := math.Sqrt(1 / float64(c.Features))
	for i := 0; i < c.Hidden*c.Features; i++ {
		m.Params[i] = s1 * gaussian(mix(c.Seed, tagInit, 1, uint64(i)), mix(c.Seed, tagInit, 2, uint64(i)))
	}
	s2 := math.Sqrt(1 / float64(c.Hidden))
	w2 := c.Hidden*c.Features + c.Hidden
	for k := 0; k < c.Hidden; k++ {
		m.Params[w2+k] = s2 * gaussian(mix(c.Seed, tagInit, 3, uint64(k)), mix(c.Seed, tagInit, 4, uint64(k)))
	}
	return m
}

// layout is the shape of the flat parameter vector.
type layout struct{ features, hidden int }

func (l layout) offsets() (b1, w2, b2 int) {
	b1 = l.hidden * l.features
	w2 = b1 + l.hidden
	b2 = w2 + l.hidden
	return
}

// forward returns the logit of params for x and leaves the hidden
// activations in hid.
func (l layout) forward(params, x, hid []float64) float64 {
	b1, w2, b2 := l.offsets()
	z := params[b2]
	for k := 0; k < l.hidden; k++ {
		a := params[b1+k]
		row := params[k*l.features : (k+1)*l.features]
		for j, xj := range x {
			// Explicit float64 conversions forbid fused multiply-add, so the
			// arithmetic is the same on every architecture.
			a = a + float64(row[j]*xj)
		}
		hid[k] = math.Tanh(a)
		z = z + float64(params[w2+k]*hid[k])
	}
	return z
}

// Scratch is the per-goroutine buffers of a gradient computation.
type Scratch struct {
	Grad   []float64
	hidden []float64
}

// NewScratch returns buffers for the model of c.
func NewScratch(c Config) *Scratch {
	return &Scratch{Grad: make([]float64, ParamCount(c)), hidden: make([]float64, c.Hidden)}
}

// ParamCount is the length of the flat parameter vector of c.
func ParamCount(c Config) int { return c.Hidden*c.Features + 2*c.Hidden + 1 }

// ShardGradient leaves in s.Grad the sum, in slot order, of the per-sample
// gradients of micro-shard m of step `step` at params, and returns the
// shard's loss sum. It depends on nothing else, so any worker computing
// shard m of a step gets the same bits.
func ShardGradient(c Config, d *Dataset, params []float64, step uint64, m int, s *Scratch) float64 {
	l := layout{features: c.Features, hidden: c.Hidden}
	g := s.Grad
	for i := range g {
		g[i] = 0
	}
	b1, w2, b2 := l.offsets()
	loss := 0.0
	lo, hi := c.ShardSlots(m)
	for j := lo; j < hi; j++ {
		i := batchIndex(c, step, j)
		x, y := d.X[i], d.Y[i]
		z := l.forward(params, x, s.hidden)
		loss += bce(z, y)
		dz := sigmoid(z) - y
		g[b2] += dz
		for k := 0; k < c.Hidden; k++ {
			h := s.hidden[k]
			g[w2+k] += float64(dz * h)
			da := float64(dz*params[w2+k]) * (1 - float64(h*h))
			g[b1+k] += da
			row := g[k*c.Features : (k+1)*c.Features]
			for f, xf := range x {
				row[f] += float64(da * xf)
			}
		}
	}
	return loss
}

// Reduce adds a micro-shard's gradient into acc. Callers add the shards of
// a step in shard order 0..MicroShards-1, into an acc that starts at zero:
// the one summation order every worker and server count shares.
func Reduce(acc, g []float64) {
	for i := range acc {
		acc[i] = acc[i] + g[i]
	}
}

// ApplyUpdate is the SGD-with-momentum update of a parameter range from the
// reduced gradient sum of the whole batch. It is element-wise, so a range
// held by one parameter server updates exactly as in one process.
func ApplyUpdate(c Config, params, velocity, sum []float64) {
	inv := 1 / float64(c.Batch)
	for i := range params {
		velocity[i] = float64(c.Momentum*velocity[i]) + float64(sum[i]*inv)
		params[i] -= float64(c.LR * velocity[i])
	}
}

// Step runs one SGD-with-momentum step on the mini-batch of step s, through
// the same micro-shard reduction as the distributed trainer, and returns the
// batch's mean loss (before the update).
func (m *Model) Step(c Config, d *Dataset, s uint64) float64 {
	if m.scratch == nil {
		m.scratch = NewScratch(c)
		m.sum = make([]float64, len(m.Params))
	}
	for i := range m.sum {
		m.sum[i] = 0
	}
	loss := 0.0
	for shard := 0; shard < c.MicroShards; shard++ {
		loss += ShardGradient(c, d, m.Params, s, shard, m.scratch)
		Reduce(m.sum, m.scratch.Grad)
		lo, hi := c.ShardSlots(shard)
		m.group.add(m.scratch.Grad, hi-lo)
	}
	m.group.close(&m.Stats)
	ApplyUpdate(c, m.Params, m.Velocity, m.sum)
	return loss / float64(c.Batch)
}

// Loss is the mean loss and accuracy over the whole dataset.
func (m *Model) Loss(d *Dataset) (loss, accuracy float64) {
	correct := 0
	l := layout{features: m.Features, hidden: m.Hidden}
	hid := make([]float64, m.Hidden)
	for i, x := range d.X {
		z := l.forward(m.Params, x, hid)
		loss += bce(z, d.Y[i])
		if (z > 0) == (d.Y[i] > 0.5) {
			correct++
		}
	}
	n := float64(len(d.X))
	return loss / n, float64(correct) / n
}

// Hash is the SHA-256 of the parameters' IEEE-754 bits, the value compared
// to show two runs ended bit-for-bit equal.
func (m *Model) Hash() string {
	h := sha256.New()
	var buf [8]byte
	for _, p := range m.Params {
		binary.LittleEndian.PutUint64(buf[:], math.Float64bits(p))
		h.Write(buf[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// bce is the binary cross-entropy of logit z against label y, computed
// stably.
func bce(z, y float64) float64 {
	return math.Max(z, 0) - z*y + math.Log1p(math.Exp(-math.Abs(z)))
}

func sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }
