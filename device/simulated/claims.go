package simulated

import (
	"fmt"
	"strconv"
)

// parseClaims reads the usage a task process states for its simulated GPUs.
// A claim that is not a number of MiB within 0..16 TiB (the most a
// simulated GPU may have) is refused with an error naming the variable, and
// the GPU's configured usage stands for that process; an SM percentage
// above 100 counts as 100.
func parseClaims(env map[string]string) (memory *uint64, smPercent *uint32, errs []error) {
	if v, ok := env[EnvMemoryMiB]; ok && v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s=%q: not a whole number of MiB", EnvMemoryMiB, v))
		case n > maxMemoryMiB:
			errs = append(errs, fmt.Errorf("%s=%d: more than %d MiB (16 TiB), the most a simulated GPU has", EnvMemoryMiB, n, maxMemoryMiB))
		default:
			b := n << 20
			memory = &b
		}
	}
	if v, ok := env[EnvSMPercent]; ok && v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: not a whole percentage", EnvSMPercent, v))
		} else {
			p := uint32(min(n, 100))
			smPercent = &p
		}
	}
	return memory, smPercent, errs
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
