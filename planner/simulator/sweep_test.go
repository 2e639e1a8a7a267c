package simulator

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestParseSweepFlags(t *testing.T) {
	s, err := parseSeeds("11-13,20")
	must.NoError(t, err)
	must.Eq(t, []uint64{11, 12, 13, 20}, s)
	_, err = parseSeeds("13-11")
	must.ErrorContains(t, err, "--seeds")
	l, err := parseLoads("0.5,1,2")
	must.NoError(t, err)
	must.Eq(t, []float64{0.5, 1, 2}, l)
	_, err = parseLoads("0.5,x")
	must.ErrorContains(t, err, "--loads")
}
