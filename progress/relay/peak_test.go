package relay

import (
	"testing"

	"github.com/shoenig/test/must"
)

// A log line's peak GPU memory is relayed; a negative, absurd or
// malformed one makes the line no progress line.
func TestParseLine_GPUMemoryPeak(t *testing.T) {
	s, ok, _ := ParseLine("step=50 loss=0.6 samples_per_sec=900 gpu_memory_peak_bytes=8589934592")
	must.True(t, ok)
	must.Eq(t, int64(8589934592), s.GPUMemoryPeakBytes)
	for _, bad := range []string{"-1", "17592186044417", "8GiB"} {
		_, ok, _ = ParseLine("step=50 loss=0.6 gpu_memory_peak_bytes=" + bad)
		must.False(t, ok, must.Sprint(bad))
	}
}
