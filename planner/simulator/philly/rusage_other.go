//go:build !linux

package philly

// peakRSS is unknown on this platform.
func peakRSS() int64 { return 0 }
