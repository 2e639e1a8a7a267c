package simulator

import (
	"testing"

	"github.com/shoenig/test/must"
)

// TestTimeQueueRound runs the queue scale round small: it decides, places
// and reclaims for the late queues.
func TestTimeQueueRound(t *testing.T) {
	d, whole, reclaimed, err := TimeQueueRound("fifo", 2000, 20, 200, 1)
	must.NoError(t, err)
	must.Positive(t, d)
	must.Positive(t, whole)
	must.Positive(t, reclaimed)
}

func BenchmarkQueueRound100k(b *testing.B) {
	for range b.N {
		if _, _, _, err := TimeQueueRound("fifo", 100000, 1000, 32000, 1); err != nil {
			b.Fatal(err)
		}
	}
}
