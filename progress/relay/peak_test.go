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

// A log line's gpu_out_of_memory=true is relayed; a malformed value makes
// the line no progress line, and so does one that also says final (done).
func TestParseLine_GPUOutOfMemory(t *testing.T) {
	s, ok, _ := ParseLine("step=50 loss=0.6 samples_per_sec=900 gpu_out_of_memory=true")
	must.True(t, ok)
	must.True(t, s.GPUOutOfMemory)
	for _, line := range []string{"step=50 loss=0.6 gpu_out_of_memory=yes", "final step=50 loss=0.6 gpu_out_of_memory=true"} {
		_, ok, _ = ParseLine(line)
		must.False(t, ok, must.Sprint(line))
	}
}
