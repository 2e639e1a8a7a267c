package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
)

const (
	// PlannerJob is the planner's Nomad job ID and PlannerService its
	// Consul service (jobspecs/planner.nomad.hcl).
	PlannerJob     = "caravan-planner"
	PlannerService = "caravan-planner"
	plannerSpec    = "jobspecs/planner.nomad.hcl"
)

// ErrNoPlanner: Consul has no healthy planner instance of a running
// allocation.
var ErrNoPlanner = errors.New("no healthy " + PlannerService + " instance of a running " + PlannerJob + " allocation in Consul")

// StartPlanner submits jobspecs/planner.nomad.hcl with the cluster's
// addresses, CaravanBin and vars ("policy=goodput", "interval=10s", ...),
// waits (2 minutes) for a healthy planner in Consul and returns its
// address (host:port).
func (c *Cluster) StartPlanner(ctx context.Context, vars ...string) (string, error) {
	base := []string{"caravan_bin=" + c.CaravanBin, "nomad_addr=" + c.NomadAddr, "consul_addr=" + c.ConsulAddr}
	if _, err := c.Submit(ctx, plannerSpec, append(base, vars...)...); err != nil {
		return "", err
	}
	var addr string
	err := c.Wait(ctx, "a healthy "+PlannerService+" in Consul", 2*time.Minute, func() (bool, error) {
		var err error
		addr, err = c.PlannerAddr(ctx)
		return err == nil, nil
	})
	if err == nil {
		c.say("Consul: service %s is healthy at http://%s (leader-elected, writes to Nomad)", PlannerService, addr)
	}
	return addr, err
}

// PlannerAddr is the Consul address (host:port) of the planner as it is
// now: a healthy instance registered by a running allocation of the
// planner job, never one a stopped allocation (an earlier run's, before the
// job was registered again) left behind.
func (c *Cluster) PlannerAddr(ctx context.Context) (string, error) {
	entries, _, err := c.Consul.Health().Service(PlannerService, "", true, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("consul: %w", err)
	}
	as, err := c.Allocs(ctx, PlannerJob)
	if err != nil {
		return "", err
	}
	for _, a := range as {
		if a.ClientStatus != nomadapi.AllocClientStatusRunning || a.DesiredStatus != nomadapi.AllocDesiredStatusRun {
			continue
		}
		for _, e := range entries {
			if strings.Contains(e.Service.ID, a.ID) {
				return fmt.Sprintf("%s:%d", e.Service.Address, e.Service.Port), nil
			}
		}
	}
	return "", ErrNoPlanner
}
