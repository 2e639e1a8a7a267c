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

	grad   []float64 // scratch
	hidden []float64 // scratch
}

// NewModel returns the initial model of c (deterministic in c.Seed).
func NewModel(c Config) *Model {
	n := c.Hidden*c.Features + 2*c.Hidden + 1
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

func (m *Model) offsets() (b1, w2, b2 int) {
	b1 = m.Hidden * m.Features
	w2 = b1 + m.Hidden
	b2 = w2 + m.Hidden
	return
}

// forward returns the logit for x and leaves the hidden activations in m.hidden.
func (m *Model) forward(x []float64) float64 {
	if len(m.hidden) != m.Hidden {
		m.hidden = make([]float64, m.Hidden)
	}
	b1, w2, b2 := m.offsets()
	z := m.Params[b2]
	for k := 0; k < m.Hidden; k++ {
		a := m.Params[b1+k]
		row := m.Params[k*m.Features : (k+1)*m.Features]
		for j, xj := range x {
			// Explicit float64 conversions forbid fused multiply-add, so the
			// arithmetic is the same on every architecture.
			a = a + float64(row[j]*xj)
		}
		m.hidden[k] = math.Tanh(a)
		z = z + float64(m.Params[w2+k]*m.hidden[k])
	}
	return z
}

// bce is the binary cross-entropy of logit z against label y, computed
// stably.
func bce(z, y float64) float64 {
	return math.Max(z, 0) - z*y + math.Log1p(math.Exp(-math.Abs(z)))
}

func sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

// Step runs one SGD-with-momentum step on the mini-batch of step s and
// returns the batch's mean loss (before the update).
func (m *Model) Step(c Config, d *Dataset, s uint64) float64 {
	if len(m.grad) != len(m.Params) {
		m.grad = make([]float64, len(m.Params))
	}
	for i := range m.grad {
		m.grad[i] = 0
	}
	b1, w2, b2 := m.offsets()
	loss := 0.0
	for j := 0; j < c.Batch; j++ {
		i := batchIndex(c, s, j)
		x, y := d.X[i], d.Y[i]
		z := m.forward(x)
		loss += bce(z, y)
		dz := sigmoid(z) - y
		m.grad[b2] += dz
		for k := 0; k < m.Hidden; k++ {
			h := m.hidden[k]
			m.grad[w2+k] += float64(dz * h)
			da := float64(dz*m.Params[w2+k]) * (1 - float64(h*h))
			m.grad[b1+k] += da
			g := m.grad[k*m.Features : (k+1)*m.Features]
			for f, xf := range x {
				g[f] += float64(da * xf)
			}
		}
	}
	inv := 1 / float64(c.Batch)
	for i := range m.Params {
		m.Velocity[i] = float64(c.Momentum*m.Velocity[i]) + float64(m.grad[i]*inv)
		m.Params[i] -= float64(c.LR * m.Velocity[i])
	}
	return loss * inv
}

// Loss is the mean loss and accuracy over the whole dataset.
func (m *Model) Loss(d *Dataset) (loss, accuracy float64) {
	correct := 0
	for i, x := range d.X {
		z := m.forward(x)
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
