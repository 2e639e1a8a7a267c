package cli

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"math"
	"strings"
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

// TestPrintFlags: a flag whose usage states its default shows it once;
// others keep Go's "(default X)".
func TestPrintFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("signal", "SIGUSR1", "signal (default $SIG or SIGUSR1)")
	fs.Int("n", 3, "count")
	var out bytes.Buffer
	PrintFlags(&out, fs)
	must.Eq(t, 2, strings.Count(out.String(), "default"), must.Sprint(out.String())) // one per flag
	must.StrNotContains(t, out.String(), `(default "SIGUSR1")`)
	must.StrContains(t, out.String(), "count (default 3)")
	must.Eq(t, "SIGUSR1", fs.Lookup("signal").DefValue) // restored
	must.Eq(t, 0, ParseExit(flag.ErrHelp))
	must.Eq(t, ExitUsage, ParseExit(errors.New("bad")))
	must.True(t, IsHelp([]string{"--help"}))
	must.False(t, IsHelp([]string{"-h", "x"}))
}
