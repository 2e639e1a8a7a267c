package cli

import (
	"bytes"
	"flag"
	"io"
	"math"
	"testing"

	"github.com/shoenig/test/must"
)

func TestChecks(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Int("n", 0, "")
	must.NoError(t, fs.Parse([]string{"-n", "-1", "stray"}))
	c := For(fs)
	must.True(t, c.Set("n"))
	must.False(t, c.Set("m"))
	c.AtLeast("n", *n, 1)
	c.Between("port", 70000, 0, 65535)
	c.Positive("interval", math.NaN())
	c.Fraction("interference", 5, 0, 1)
	c.OneOf("log-level", "chatty", LogLevels...)
	c.NoArgs()
	err := c.Err()
	must.ErrorIs(t, err, ErrUsage)
	var out bytes.Buffer
	must.Eq(t, ExitUsage, Report(&out, "caravan x", err))
	must.Eq(t, `caravan x: -n: must be at least 1, got -1
caravan x: -port: must be between 0 and 65535, got 70000
caravan x: -interval: must be greater than 0, got NaN
caravan x: -interference: must be between 0 and 1, got 5
caravan x: -log-level: must be one of trace, debug, info, warn, error, off, got "chatty"
caravan x: unexpected argument "stray" (flags go before arguments; see -h)
`, out.String())
	must.NoError(t, For(fs).Err())
}
