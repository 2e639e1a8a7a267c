package satmath

import (
	"math"
	"testing"

	"github.com/shoenig/test/must"
)

func TestSaturating(t *testing.T) {
	const max64, max32 = uint64(math.MaxUint64), uint32(math.MaxUint32)
	cases := []struct {
		name      string
		got, want uint64
	}{
		{"add", Add(2, 3), 5},
		{"add at the edge", Add(max64-1, 1), max64},
		{"add overflows", Add(max64/2+1, max64/2+1), max64},
		{"mul", Mul(3, 1<<20), 3 << 20},
		{"mul by zero", Mul(max64, 0), 0},
		{"mul overflows", Mul(1<<44, 1<<20), max64},
		{"MiB", MiB(40960), 40960 << 20},
		{"MiB overflows", MiB(1 << 44), max64},
		{"add32", uint64(Add32(60, 50)), 110},
		{"add32 overflows", uint64(Add32(max32, 1)), uint64(max32)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { must.Eq(t, tc.want, tc.got) })
	}
}
