package config

import (
	"math"

	"github.com/caravan-nomad/caravan/planner/packing"
)

// Packing tunes live introspective packing (planner/POLICY.md, "Live
// packing"): the planner measures each job's progress rate alone and while
// it shares a GPU, and moves one job of a pair that loses off the shared
// GPU. Off by default: an unpack restarts a job's workers.
type Packing struct {
	// Enabled makes the planner act on its unpack decisions; off, it
	// measures and shows them only.
	Enabled bool
	// Margin is packing.Config.Margin (admission by predicted gain; the
	// live planner does not steer admissions yet).
	Margin float64
	// UnpackBelow is the measured combined gain below which a pair is
	// unpacked.
	UnpackBelow float64
	// MinRatio is the fraction of its solo rate below which a measured
	// job's GPU is unpacked, whatever the combined gain.
	MinRatio float64
}

// DefaultPacking is the packing block's defaults (the policy's own).
func DefaultPacking() Packing {
	d := packing.DefaultConfig()
	return Packing{Margin: d.Margin, UnpackBelow: d.UnpackBelow, MinRatio: d.MinRatio}
}

type filePacking struct {
	Enabled     *bool    `hcl:"enabled,optional"`
	Margin      *float64 `hcl:"margin,optional"`
	UnpackBelow *float64 `hcl:"unpack_below,optional"`
	MinRatio    *float64 `hcl:"min_ratio,optional"`
}

func (fp *filePacking) apply(p *Packing) {
	if fp == nil {
		return
	}
	set(fp.Enabled, &p.Enabled)
	set(fp.Margin, &p.Margin)
	set(fp.UnpackBelow, &p.UnpackBelow)
	set(fp.MinRatio, &p.MinRatio)
}

// MaxUnpackBelow bounds packing.unpack_below: a combined gain is a sum of
// per-job ratios, each at most packing.Config.MaxRatio.
const MaxUnpackBelow = 100

func validatePacking(p Packing, bad func(field, format string, args ...any)) {
	if math.IsNaN(p.Margin) || p.Margin < 0 || p.Margin > 10 {
		bad("packing.margin", "must be in 0..10, got %v", p.Margin)
	}
	if math.IsNaN(p.UnpackBelow) || p.UnpackBelow < 0 || p.UnpackBelow > MaxUnpackBelow {
		bad("packing.unpack_below", "must be in 0..%d, got %v", MaxUnpackBelow, p.UnpackBelow)
	}
	if math.IsNaN(p.MinRatio) || p.MinRatio < 0 || p.MinRatio > 1 {
		bad("packing.min_ratio", "must be in 0..1, got %v", p.MinRatio)
	}
}
