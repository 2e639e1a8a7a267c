// Command simulate runs the planner simulator without the rest of caravan:
// `go run ./planner/simulator/cmd/simulate --table` is what `make bench`
// calls; it takes the same flags as `caravan planner simulate`.
package main

import (
	"os"

	"github.com/caravan-nomad/caravan/planner/simulator"
)

func main() { os.Exit(simulator.Main(os.Args[1:])) }
