// Package consul connects the planner to Consul: it registers the service
// with an HTTP health check, and elects one leader among planner instances
// with a Consul lock held by a session tied to that check, so only the leader
// writes to Nomad and leadership moves within seconds when the leader dies.
package consul

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
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
	// UIPath, when set, is the web page's path: its URL goes into the
	// service meta as caravan_ui.
	UIPath string
}

// meta is the service's Consul meta.
func (s Service) meta() map[string]string {
	m := map[string]string{"caravan_component": "planner"}
	if s.UIPath != "" {
		m["caravan_ui"] = "http://" + net.JoinHostPort(s.Address, strconv.Itoa(s.Port)) + s.UIPath
	}
	return m
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
		Meta:    s.meta(),
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

// Registrar keeps the service registered: Consul can lose its state (an
// agent restarted without its data directory), and then sessions tied to the
// health check fail with "Missing check" until the service is registered
// again. Run checks the registration every Every and restores it; the
// elector calls Ensure before each session.
type Registrar struct {
	Client  *consulapi.Client
	Service Service
	Clock   clock.Clock
	Logger  hclog.Logger
	// Every is how often Run checks the registration (default 5 s).
	Every time.Duration

	mu         sync.Mutex
	registered bool
}

// Ensure registers the service unless the local agent already holds its
// health check.
func (r *Registrar) Ensure(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	checks, err := r.Client.Agent().ChecksWithFilterOpts("", (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("reading the agent's checks: %w", err)
	}
	if _, ok := checks[r.Service.CheckID()]; ok {
		return nil
	}
	if err := r.Client.Agent().ServiceRegisterOpts(r.Service.registration(), consulapi.ServiceRegisterOpts{}.WithContext(ctx)); err != nil {
		return fmt.Errorf("registering %s: %w", r.Service.ID, err)
	}
	if r.registered {
		r.Logger.Warn("registration was gone from consul (state lost?); registered again", "service_id", r.Service.ID)
	} else {
		r.Logger.Info("registered in consul", "service", r.Service.Name, "service_id", r.Service.ID)
	}
	r.registered = true
	return nil
}

// Run keeps the registration until ctx ends, backing off while Consul is
// unreachable. It returns ctx.Err().
func (r *Registrar) Run(ctx context.Context) error {
	every := r.Every
	if every <= 0 {
		every = 5 * time.Second
	}
	b := retry.New(500*time.Millisecond, 15*time.Second)
	for {
		wait := every
		if err := r.Ensure(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.Logger.Warn("consul registration failed, backing off", "error", err)
			wait = b.Next()
		} else {
			b.Reset()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.Clock.After(wait):
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
