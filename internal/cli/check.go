// Package cli holds the checks every caravan subcommand applies to its
// flags, so an invalid value is an error naming the flag (exit 2) rather
// than a value silently used.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// ExitUsage is the exit status for invalid flags or arguments.
const ExitUsage = 2

// ErrUsage wraps every flag and argument error.
var ErrUsage = errors.New("invalid usage")

// Checks collects flag errors; Err joins them.
type Checks struct {
	fs   *flag.FlagSet
	errs []error
}

// For returns checks over fs's parsed flags.
func For(fs *flag.FlagSet) *Checks { return &Checks{fs: fs} }

// Fail records an error for flag name.
func (c *Checks) Fail(name, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%w: -%s: %s", ErrUsage, name, fmt.Sprintf(format, args...)))
}

// Set reports whether flag name was given on the command line.
func (c *Checks) Set(name string) bool {
	set := false
	c.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// AtLeast checks an integer flag's lower bound.
func (c *Checks) AtLeast(name string, v, min int) {
	if v < min {
		c.Fail(name, "must be at least %d, got %d", min, v)
	}
}

// Between checks an integer flag is within [lo, hi].
func (c *Checks) Between(name string, v, lo, hi int) {
	if v < lo || v > hi {
		c.Fail(name, "must be between %d and %d, got %d", lo, hi, v)
	}
}

// Positive checks a float flag is > 0 (and a number).
func (c *Checks) Positive(name string, v float64) {
	if !(v > 0) {
		c.Fail(name, "must be greater than 0, got %g", v)
	}
}

// Fraction checks a float flag is within [lo, hi] (and a number).
func (c *Checks) Fraction(name string, v, lo, hi float64) {
	if !(v >= lo && v <= hi) {
		c.Fail(name, "must be between %g and %g, got %g", lo, hi, v)
	}
}

// OneOf checks a string flag is one of the allowed values.
func (c *Checks) OneOf(name, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		c.Fail(name, "must be one of %s, got %q", strings.Join(allowed, ", "), v)
	}
}

// NoArgs refuses positional arguments left after the flags.
func (c *Checks) NoArgs() {
	if c.fs.NArg() > 0 {
		c.errs = append(c.errs, fmt.Errorf("%w: unexpected argument %q (flags go before arguments; see -h)", ErrUsage, c.fs.Arg(0)))
	}
}

// Err returns every recorded error, or nil.
func (c *Checks) Err() error { return errors.Join(c.errs...) }

// LogLevels are go-hclog's level names, for -log-level flags.
var LogLevels = []string{"trace", "debug", "info", "warn", "error", "off"}

// Report prints err for prog to w and returns ExitUsage.
func Report(w io.Writer, prog string, err error) int {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(w, "%s: %s\n", prog, strings.TrimPrefix(line, ErrUsage.Error()+": "))
	}
	return ExitUsage
}
