//go:build !linux

package simulator

// peakRSS is unknown on this platform.
func peakRSS() int64 { return 0 }
