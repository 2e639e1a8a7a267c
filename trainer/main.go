// Package trainer is a small deterministic training program that follows
// caravan's checkpoint protocol.
package trainer

import (
	"fmt"
	"os"
)

// Main runs `caravan trainer ...`.
func Main(args []string) int {
	fmt.Fprintln(os.Stderr, "caravan trainer: not implemented yet")
	return 1
}
