// Package simulator replays a workload through the planner's policies.
package simulator

import (
	"fmt"
	"os"
)

// Main runs `caravan planner simulate ...`.
func Main(args []string) int {
	fmt.Fprintln(os.Stderr, "caravan planner simulate: not implemented yet")
	return 1
}
