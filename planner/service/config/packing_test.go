package config

import (
	"testing"

	"github.com/shoenig/test/must"
)

// TestPacking: the packing block is off by default at the packing policy's
// thresholds, a file sets each key, and a bad value is an error that names
// its field.
func TestPacking(t *testing.T) {
	c := Default()
	must.Eq(t, Packing{Margin: 0.1, UnpackBelow: 1.0, MinRatio: 0.7}, c.Packing)
	must.NoError(t, c.Validate())

	must.NoError(t, Parse(c, "p.hcl", []byte(`packing {
  enabled      = true
  margin       = 0.2
  unpack_below = 0.95
  min_ratio    = 0.6
}`)))
	must.Eq(t, Packing{Enabled: true, Margin: 0.2, UnpackBelow: 0.95, MinRatio: 0.6}, c.Packing)
	must.NoError(t, c.Validate())

	bad := []struct{ src, field string }{
		{`packing { min_ratio = 1.5 }`, "packing.min_ratio"},
		{`packing { margin = -1 }`, "packing.margin"},
		{`packing { unpack_below = 1000 }`, "packing.unpack_below"},
	}
	for _, tc := range bad {
		c := Default()
		must.NoError(t, Parse(c, "p.hcl", []byte(tc.src)))
		err := c.Validate()
		must.ErrorContains(t, err, tc.field)
	}
	must.ErrorContains(t, Parse(Default(), "p.hcl", []byte(`packing { enable = true }`)), "enable")
}
