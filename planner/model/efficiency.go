package model

import "math"

// Efficiency is the statistical efficiency of training with global batch
// size batch instead of initBatch, from the gradient statistics a job
// reports (gradSqr: squared norm of the true gradient, gradVar: variance of
// the per-sample gradient, both measured at initBatch). It is the progress
// one sample makes at batch relative to one sample at initBatch, in (0, 1]
// for batch >= initBatch (McCandlish et al.'s gradient noise scale, as used
// by Pollux):
//
//	gain(s) = (var + sqr) / (var/s + sqr), s = batch/initBatch
//	efficiency = gain(s) / s
func Efficiency(gradSqr, gradVar, initBatch, batch float64) float64 {
	if initBatch <= 0 || batch <= 0 {
		return 0
	}
	s := batch / initBatch
	return Gain(gradSqr, gradVar, s) / s
}

// Gain is how many initBatch-sized steps one step at scale s = batch /
// initBatch is worth.
func Gain(gradSqr, gradVar, s float64) float64 {
	den := gradVar/s + gradSqr
	if den <= 0 || math.IsNaN(den) || math.IsInf(den, 0) {
		return 1
	}
	return (gradVar + gradSqr) / den
}
