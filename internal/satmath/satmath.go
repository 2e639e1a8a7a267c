// Package satmath is saturating unsigned arithmetic for figures that must
// never wrap: GPU memory and utilisation summed over processes a task (or a
// misbehaving driver) reports. A sum that would overflow reads as the
// type's maximum, never as a small number.
package satmath

import (
	"math"
	"math/bits"
)

// Add returns a+b, or math.MaxUint64 where that overflows.
func Add(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}

// Mul returns a*b, or math.MaxUint64 where that overflows.
func Mul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// Add32 returns a+b, or math.MaxUint32 where that overflows.
func Add32(a, b uint32) uint32 {
	s, carry := bits.Add32(a, b, 0)
	if carry != 0 {
		return math.MaxUint32
	}
	return s
}

// MiB returns n MiB in bytes, or math.MaxUint64 where that overflows.
func MiB(n uint64) uint64 { return Mul(n, 1<<20) }
