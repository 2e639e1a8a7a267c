package simulated

import (
	"fmt"
	"strconv"
)

// claims is the usage a task process states for its simulated GPUs.
type claims struct {
	memory, peak *uint64
	smPercent    *uint32
}

// parseClaims reads the usage a task process states for its simulated GPUs.
// A memory or peak claim that is not a number of MiB within 0..16 TiB (the
// most a simulated GPU may have) is refused with an error naming the
// variable, and the GPU's configured usage stands for that process; an SM
// percentage above 100 counts as 100.
func parseClaims(env map[string]string) (c claims, errs []error) {
	c.memory = parseMiB(env, EnvMemoryMiB, &errs)
	c.peak = parseMiB(env, EnvPeakMemoryMiB, &errs)
	if v, ok := env[EnvSMPercent]; ok && v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: not a whole percentage", EnvSMPercent, v))
		} else {
			p := uint32(min(n, 100))
			c.smPercent = &p
		}
	}
	return c, errs
}

// parseMiB reads env[name] as MiB within 0..16 TiB, in bytes (nil when
// absent or refused, the refusal appended to errs).
func parseMiB(env map[string]string, name string, errs *[]error) *uint64 {
	v, ok := env[name]
	if !ok || v == "" {
		return nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	switch {
	case err != nil:
		*errs = append(*errs, fmt.Errorf("%s=%q: not a whole number of MiB", name, v))
	case n > maxMemoryMiB:
		*errs = append(*errs, fmt.Errorf("%s=%d: more than %d MiB (16 TiB), the most a simulated GPU has", name, n, maxMemoryMiB))
	default:
		b := n << 20
		return &b
	}
	return nil
}

// warnClaim logs a task's invalid claim once per process and claim.
// c.mu must be held.
func (c *Client) warnClaim(pid int, token string, err error) {
	key := strconv.Itoa(pid) + "/" + err.Error()
	if c.warned[key] {
		return
	}
	if len(c.warned) > 1024 { // bounded: processes come and go
		clear(c.warned)
	}
	c.warned[key] = true
	c.cfg.Logger.Warn("task's simulated GPU usage claim refused; the configured usage stands",
		"pid", pid, "reservation", token, "error", err)
}
