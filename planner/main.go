// Package planner is caravan's Optimus planner: the live service that watches
// deep-learning jobs in Nomad (planner/service), and the simulator that
// replays published workloads (planner/simulator) through the same policy
// code (planner/policy, planner/model).
package planner

import (
	"github.com/caravan-nomad/caravan/planner/service"
	"github.com/caravan-nomad/caravan/planner/simulator"
)

// Main runs `caravan planner [simulate] ...`.
func Main(args []string) int {
	if len(args) > 0 && args[0] == "simulate" {
		return simulator.Main(args[1:])
	}
	return service.Main(args)
}
