package policy

import (
	"errors"
	"fmt"
	"sort"
)

// ErrUnknownPolicy is returned by New for a name it does not know.
var ErrUnknownPolicy = errors.New("unknown policy")

var constructors = map[string]func() Policy{
	"fifo":           func() Policy { return NewFIFO() },
	"drf":            func() Policy { return NewDRF() },
	"tiresias":       func() Policy { return NewTiresias() },
	"optimus":        func() Policy { return NewOptimus() },
	"goodput":        func() Policy { return NewGoodput() },
	"goodput-oracle": func() Policy { return NewGoodputOracle() },
	"pollux":         func() Policy { return NewPollux() },
}

// Names lists the registered policy names, sorted.
func Names() []string {
	out := make([]string, 0, len(constructors))
	for n := range constructors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Infos describes every registered policy, sorted by name.
func Infos() []Info {
	out := make([]Info, 0, len(constructors))
	for _, n := range Names() {
		out = append(out, constructors[n]().Info())
	}
	return out
}

// Best is the name of caravan's default policy (class online).
const Best = "goodput"

// New returns a fresh policy by name.
func New(name string) (Policy, error) {
	c, ok := constructors[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %v)", ErrUnknownPolicy, name, Names())
	}
	return c(), nil
}
