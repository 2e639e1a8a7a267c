// Package service is the live planner: it watches Nomad, decides and submits
// job updates.
package service

import (
	"fmt"
	"os"
)

// Main runs `caravan planner ...`.
func Main(args []string) int {
	fmt.Fprintln(os.Stderr, "caravan planner: not implemented yet")
	return 1
}
