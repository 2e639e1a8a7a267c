package queue

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/caravan-nomad/caravan/planner/policy"
)

// Unlimited is the value of BorrowLimit and LendLimit when none is set.
const Unlimited = -1

// DefaultName is the queue that holds jobs of namespaces no queue lists,
// when the config names none.
const DefaultName = "default"

// MetaKey is the job meta key with which a job chooses among the queues
// its namespace may use.
const MetaKey = "caravan_queue"

// Queue is one team queue. GPU amounts are in policy.MilliGPU units.
type Queue struct {
	Name       string
	Namespaces []string
	// Guarantee is the GPU quota the queue gets whenever its jobs want it.
	Guarantee int
	// BorrowLimit bounds how much more than Guarantee the queue may use
	// (Unlimited: any idle GPU; 0: never borrows).
	BorrowLimit int
	// LendLimit bounds how much of its idle guarantee others may borrow
	// (Unlimited: all of it).
	LendLimit int
	// Weight shares what is left over between queues (default 1).
	Weight float64
	// Allow lists further namespaces whose jobs may choose this queue
	// with the MetaKey job meta ("*": any namespace). Members (Namespaces)
	// may always choose it.
	Allow []string
}

// Config is the set of queues. Default names the queue for jobs of
// namespaces no queue lists; empty means an implicit queue named
// DefaultName with no guarantee, unlimited borrowing and weight 1.
type Config struct {
	Queues  []Queue
	Default string
	// NoReclaim turns reclaim off: a queue below its guarantee waits for
	// borrowers to finish (borrowing without preemption).
	NoReclaim bool
}

// Enabled reports whether any queue is configured.
func (c *Config) Enabled() bool { return c != nil && len(c.Queues) > 0 }

// ErrInvalid wraps every validation failure.
var ErrInvalid = errors.New("invalid queue config")

// ParseGPUs parses a GPU amount: a decimal number of GPUs ("2", "0.25"),
// in thousandths at most. field names the setting in errors.
func ParseGPUs(field, s string) (int, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a number of GPUs", field, s)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("%s: must be a non-negative number of GPUs, got %q", field, s)
	}
	if v > maxGPUs {
		return 0, fmt.Errorf("%s: at most %d GPUs, got %q", field, maxGPUs, s)
	}
	m := v * policy.MilliGPU
	if math.Abs(m-math.Round(m)) > 1e-6 {
		return 0, fmt.Errorf("%s: at most three decimals (1/1000 of a GPU), got %q", field, s)
	}
	return int(math.Round(m)), nil
}

// maxWeight bounds a queue's weight.
const maxWeight = 1_000_000

// maxGPUs bounds any GPU amount (far beyond any cluster; keeps sums in int).
const maxGPUs = 10_000_000

// Validate reports every problem of c at once, each naming the queue and
// the field. It refuses only what is wrong at any cluster size: guarantees
// that add up to more than the live cluster are no error (a round scales
// them, EffectiveGuarantees).
func (c *Config) Validate() error {
	var errs []error
	bad := func(q, field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: queue %q: %s: %s", ErrInvalid, q, field, fmt.Sprintf(format, args...)))
	}
	names := map[string]bool{}
	owner := map[string]string{}
	for i, q := range c.Queues {
		name := q.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i)
			bad(name, "name", "must not be empty")
		} else if names[name] {
			bad(name, "name", "defined twice")
		}
		names[name] = true
		if len(q.Namespaces) == 0 {
			bad(name, "namespaces", "must list at least one Nomad namespace")
		}
		for _, ns := range q.Namespaces {
			switch {
			case ns == "":
				bad(name, "namespaces", "an empty namespace")
			case owner[ns] != "" && owner[ns] != name:
				bad(name, "namespaces", "namespace %q is already in queue %q", ns, owner[ns])
			case owner[ns] == name:
				bad(name, "namespaces", "namespace %q listed twice", ns)
			default:
				owner[ns] = name
			}
		}
		for _, ns := range q.Allow {
			if ns == "" {
				bad(name, "allow_namespaces", "an empty namespace")
			}
		}
		if q.Guarantee < 0 {
			bad(name, "guarantee", "must not be negative, got %s", gpus(q.Guarantee))
		}
		if q.BorrowLimit < Unlimited {
			bad(name, "borrowing_limit", "must not be negative, got %s", gpus(q.BorrowLimit))
		}
		if q.LendLimit < Unlimited {
			bad(name, "lending_limit", "must not be negative, got %s", gpus(q.LendLimit))
		} else if q.LendLimit != Unlimited && q.LendLimit > q.Guarantee {
			bad(name, "lending_limit", "must not exceed the guarantee %s, got %s", gpus(q.Guarantee), gpus(q.LendLimit))
		}
		if math.IsNaN(q.Weight) || math.IsInf(q.Weight, 0) || q.Weight <= 0 || q.Weight > maxWeight {
			bad(name, "weight", "must be in (0, %d], got %v", maxWeight, q.Weight)
		}
	}
	if c.Default != "" && !names[c.Default] {
		errs = append(errs, fmt.Errorf("%w: queues.default: no queue named %q", ErrInvalid, c.Default))
	}
	return errors.Join(errs...)
}

// gpus formats a milli-GPU amount as GPUs.
func gpus(m int) string {
	if m == Unlimited {
		return "unlimited"
	}
	return strconv.FormatFloat(float64(m)/policy.MilliGPU, 'f', -1, 64)
}

// withDefault returns the queues with the implicit default queue appended
// when the config names none, and the index of the default queue.
func (c *Config) withDefault() ([]Queue, int) {
	qs := slices.Clone(c.Queues)
	if c.Default != "" {
		for i, q := range qs {
			if q.Name == c.Default {
				return qs, i
			}
		}
	}
	for i, q := range qs {
		if q.Name == DefaultName {
			return qs, i
		}
	}
	qs = append(qs, Queue{Name: DefaultName, BorrowLimit: Unlimited, LendLimit: Unlimited, Weight: 1})
	return qs, len(qs) - 1
}
