// Package cluster drives a running Nomad (and Consul) cluster the way a
// user does: it submits jobspecs with the Nomad CLI, waits for
// allocations to a deadline, scales, reads logs and events, and stops and
// purges jobs. `caravan demo`, `caravan testbed` and the e2e harness all
// drive the cluster through it; its calls take a context and return
// errors (the harness turns them into test failures).
package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
)

// Config says which cluster is driven, and with which Nomad CLI.
type Config struct {
	// Root is the repository root: relative jobspec paths are read from
	// it, and the Nomad CLI runs in it.
	Root string
	// NomadBin is the Nomad CLI that submits jobspecs and reads logs.
	NomadBin string
	// NomadAddr is Nomad's HTTP address (with its scheme); ConsulAddr
	// Consul's (host:port, with or without http://).
	NomadAddr, ConsulAddr string
	// Token is the ACL token the CLI sends (NOMAD_TOKEN); empty: none.
	Token string
	// CaravanBin is the caravan binary as the clients run it (the
	// planner jobspec's caravan_bin).
	CaravanBin string
	// PollEvery is how often Wait reads the cluster (default 500ms).
	PollEvery time.Duration
	// Say, when set, gets the progress lines: a job submitted, a wait
	// that goes on, the planner found.
	Say func(format string, args ...any)
}

// Cluster drives one cluster. Nomad and Consul are its API clients.
type Cluster struct {
	Config
	Nomad  *nomadapi.Client
	Consul *consulapi.Client
}

// Dial makes the API clients of the cluster cfg names (it connects to
// nothing yet).
func Dial(cfg Config) (*Cluster, error) {
	n, err := nomadapi.NewClient(&nomadapi.Config{Address: cfg.NomadAddr})
	if err != nil {
		return nil, fmt.Errorf("nomad client: %w", err)
	}
	c, err := consulapi.NewClient(&consulapi.Config{Address: consulHost(cfg.ConsulAddr)})
	if err != nil {
		return nil, fmt.Errorf("consul client: %w", err)
	}
	return &Cluster{Config: cfg, Nomad: n, Consul: c}, nil
}

func consulHost(addr string) string { return strings.TrimPrefix(addr, "http://") }

// say prints a progress line when the config asks for them.
func (c *Cluster) say(format string, args ...any) {
	if c.Say != nil {
		c.Say(format, args...)
	}
}

// CLI runs the Nomad CLI against the cluster and returns its combined
// output; a failure's error holds the output too.
func (c *Cluster) CLI(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.NomadBin, args...)
	cmd.Dir = c.Root
	cmd.Env = append(cmd.Environ(), "NOMAD_ADDR="+c.NomadAddr)
	if c.ConsulAddr != "" {
		cmd.Env = append(cmd.Env, "CONSUL_HTTP_ADDR="+consulHost(c.ConsulAddr))
	}
	if c.Token != "" {
		cmd.Env = append(cmd.Env, "NOMAD_TOKEN="+c.Token)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return out.String(), fmt.Errorf("nomad %s: %w", strings.Join(args, " "), ctx.Err())
		}
		return out.String(), fmt.Errorf("nomad %s: %w: %s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}
