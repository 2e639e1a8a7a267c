package trainer

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Config is one training run. Two runs with equal Configs end with the same
// parameters bit for bit, however often they are interrupted and resumed.
type Config struct {
	Seed     uint64 // dataset, teacher and initial weights
	Samples  int    // dataset size
	Features int    // input width
	Hidden   int    // hidden units of the one-hidden-layer MLP
	Batch    int    // mini-batch size (global, for a data-parallel job)
	// MicroShards splits each step's batch into this many fixed micro-shards
	// whose gradients are reduced in shard order: the unit of work a worker
	// is given, and what makes any worker count end bit for bit equal.
	MicroShards int
	Steps       uint64  // total SGD steps
	LR          float64 // learning rate
	Momentum    float64 // heavy-ball momentum in [0,1)
	LabelNoise  float64 // probability of flipping a label

	// Run-time knobs that do not change the result.
	LogEvery  uint64        // print progress every N steps (0: never)
	StepDelay time.Duration // sleep after each step, to make short runs last
	// ComputePerSample is MODELLED compute: a sleep per sample processed,
	// standing in for a GPU's time per sample (this machine's cores do not
	// scale with workers).
	ComputePerSample time.Duration
}

// DefaultConfig is a run that takes a few seconds on one core.
func DefaultConfig() Config {
	return Config{
		Seed: 1, Samples: 4096, Features: 32, Hidden: 16, Batch: 64, MicroShards: 8,
		Steps: 2000, LR: 0.1, Momentum: 0.9, LabelNoise: 0.05, LogEvery: 100,
	}
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.Samples <= 0:
		return errors.New("samples must be positive")
	case c.Features <= 0:
		return errors.New("features must be positive")
	case c.Hidden <= 0:
		return errors.New("hidden must be positive")
	case c.Batch <= 0:
		return errors.New("batch must be positive")
	case c.MicroShards <= 0 || c.MicroShards > c.Batch:
		return errors.New("micro-shards must be in [1,batch]")
	case c.Steps == 0:
		return errors.New("steps must be positive")
	case !(c.LR > 0) || math.IsInf(c.LR, 0):
		return errors.New("lr must be a positive number")
	case !(c.Momentum >= 0 && c.Momentum < 1):
		return errors.New("momentum must be in [0,1)")
	case !(c.LabelNoise >= 0 && c.LabelNoise < 0.5):
		return errors.New("label-noise must be in [0,0.5)")
	case c.StepDelay < 0:
		return errors.New("step-delay must not be negative")
	case c.ComputePerSample < 0:
		return errors.New("compute-per-sample must not be negative")
	}
	return nil
}

// ComputeLabel labels the modelled compute time wherever it is printed.
func (c Config) ComputeLabel() string {
	if c.ComputePerSample <= 0 {
		return "compute=real"
	}
	return fmt.Sprintf("compute=modelled %s/sample", c.ComputePerSample)
}

// ShardSlots returns the batch slots [lo,hi) of micro-shard m.
func (c Config) ShardSlots(m int) (lo, hi int) {
	return m * c.Batch / c.MicroShards, (m + 1) * c.Batch / c.MicroShards
}

// Fingerprint identifies the fields that determine the result (not Steps:
// a run may be extended). A checkpoint written under one fingerprint is
// refused by a run with another.
func (c Config) Fingerprint() [32]byte {
	h := sha256.New()
	for _, v := range []uint64{
		c.Seed, uint64(c.Samples), uint64(c.Features), uint64(c.Hidden), uint64(c.Batch), uint64(c.MicroShards),
		math.Float64bits(c.LR), math.Float64bits(c.Momentum), math.Float64bits(c.LabelNoise),
	} {
		_ = binary.Write(h, binary.LittleEndian, v)
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

func (c Config) String() string {
	return fmt.Sprintf("seed=%d samples=%d features=%d hidden=%d batch=%d micro_shards=%d steps=%d lr=%g momentum=%g label_noise=%g",
		c.Seed, c.Samples, c.Features, c.Hidden, c.Batch, c.MicroShards, c.Steps, c.LR, c.Momentum, c.LabelNoise)
}
