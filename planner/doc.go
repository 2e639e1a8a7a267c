// Package planner is caravan's Optimus planner: the live service that watches
// deep-learning jobs in Nomad (planner/service), and the simulator that
// replays published workloads (planner/simulator) through the same policy
// code (planner/policy, planner/model). The binary's command table (main.go
// at the repository root) runs `caravan planner` and its commands.
package planner
