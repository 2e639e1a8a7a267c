// Package consul connects the planner to Consul: it registers the service
// with an HTTP health check, and elects one leader among planner instances
// with a Consul lock held by a session tied to that check, so only the leader
// writes to Nomad and leadership moves within seconds when the leader dies.
package consul

import (
	"context"
	"fmt"
	"strconv"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"

	"github.com/caravan-nomad/caravan/planner/service/clock"
	"github.com/caravan-nomad/caravan/planner/service/retry"
)

// Service describes this planner instance in the Consul catalog.
type Service struct {
	Name    string
	ID      string
	Address string
	Port    int
	Tags    []string
	// HealthPath is the HTTP path of the health check (e.g. /v1/health).
	HealthPath    string
	CheckInterval time.Duration
}

// CheckID is the ID of the service's health check; sessions list it so a
// dead planner loses its lock as soon as the check fails.
func (s Service) CheckID() string { return "service:" + s.ID }

func (s Service) registration() *consulapi.AgentServiceRegistration {
	return &consulapi.AgentServiceRegistration{
		ID:      s.ID,
		Name:    s.Name,
		Address: s.Address,
		Port:    s.Port,
		Tags:    s.Tags,
		Meta:    map[string]string{"caravan_component": "planner"},
		Check: &consulapi.AgentServiceCheck{
			CheckID:  s.CheckID(),
			Name:     "caravan planner HTTP health",
			HTTP:     "http://" + s.Address + ":" + strconv.Itoa(s.Port) + s.HealthPath,
			Method:   "GET",
			Interval: s.CheckInterval.String(),
			Timeout:  s.CheckInterval.String(),
			// Start passing: the HTTP server is already up when we register,
			// and a session cannot be created on a critical check.
			Status:                         consulapi.HealthPassing,
			DeregisterCriticalServiceAfter: "10m",
		},
	}
}

// Register registers the service, retrying with backoff until it succeeds or
// ctx ends.
func Register(ctx context.Context, c *consulapi.Client, s Service, clk clock.Clock, log hclog.Logger) error {
	b := retry.New(500*time.Millisecond, 15*time.Second)
	for {
		err := c.Agent().ServiceRegisterOpts(s.registration(), consulapi.ServiceRegisterOpts{}.WithContext(ctx))
		if err == nil {
			log.Info("registered in consul", "service", s.Name, "service_id", s.ID)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Warn("consul registration failed, backing off", "error", err)
		if err := b.Wait(ctx, clk); err != nil {
			return err
		}
	}
}

// Deregister removes the service (best effort, on shutdown).
func Deregister(c *consulapi.Client, id string) error {
	if err := c.Agent().ServiceDeregister(id); err != nil {
		return fmt.Errorf("deregistering %s: %w", id, err)
	}
	return nil
}
