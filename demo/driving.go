package demo

import (
	"context"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
)

// The exported half of the demo's cluster-driving code, for other drivers
// of a running cluster (`caravan testbed`): one library, not a copy.

// Submit runs a jobspec (relative to Config.Root) with `nomad job run
// -detach` and the vars ("name=value"), as a user does.
func (d *Demo) Submit(ctx context.Context, jobspec, jobID string, vars ...string) error {
	return d.submit(ctx, jobspec, jobID, vars...)
}

// Poll calls f every half second until it reports done, the context ends or
// timeout passes; what names what is awaited in the progress lines.
func (d *Demo) Poll(ctx context.Context, what string, timeout time.Duration, f func() (bool, error)) error {
	return d.poll(ctx, what, timeout, f)
}

// Say prints an indented progress line.
func (d *Demo) Say(format string, args ...any) { d.say(format, args...) }

// Nomad and Consul are the clients the demo drives the cluster with.
func (d *Demo) Nomad() *nomadapi.Client   { return d.nomad }
func (d *Demo) Consul() *consulapi.Client { return d.consul }

// PlannerJob is the planner's Nomad job ID (jobspecs/planner.nomad.hcl).
const PlannerJob = plannerJob
