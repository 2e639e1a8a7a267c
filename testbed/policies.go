package testbed

import (
	"fmt"
	"slices"
	"strings"

	"github.com/caravan-nomad/caravan/planner/policy"
)

// checkPolicy accepts Static and the planner's policies.
func checkPolicy(name string) error {
	if name == Static || slices.Contains(policy.Names(), name) {
		return nil
	}
	return fmt.Errorf("unknown policy %q (known: %s, %s)", name, Static, strings.Join(policy.Names(), ", "))
}
