// Package policy decides how many workers (and parameter servers) each
// deep-learning job gets and on which nodes they run. It is pure Go with no
// Nomad in it: the live planner service (planner/service) and the simulator
// (planner/simulator) call the same code.
//
// The contract, in one place:
//
//	p, err := policy.New("optimus")           // or "fifo", "drf", "tiresias", "goodput", "goodput-oracle", "pollux"
//	info := p.Info()                          // information class (oracle, declared, online) and traits
//	plan, err := p.Allocate(policy.Input{Now: now, Cluster: cluster, Jobs: jobs})
//	for _, jp := range plan.Jobs { ... jp.Workers, jp.Placement, jp.Gain, jp.Reason ... }
//
// A Job carries its limits (Min, Max, Gang), its per-worker demand
// (GPU in milli-GPUs so fractional GPUs pack, CPU, memory), what it holds now
// (Current, used to keep placements and to charge restart costs), and a
// SpeedModel plus Remaining work so the marginal-gain policies can predict
// remaining time for any number of workers. Policies never mutate their input.
//
// Policies may keep state between rounds (Tiresias keeps its queues), so one
// Policy value belongs to one scheduling loop and is not safe for concurrent
// Allocate calls.
package policy
