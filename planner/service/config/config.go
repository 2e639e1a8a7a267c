// Package config holds the planner service's configuration: HCL file, flags
// and the standard NOMAD_* / CONSUL_* environment variables, in that order of
// precedence (flags win over the file, the file over the environment).
package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/caravan-nomad/caravan/internal/cli"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/queue"
)

// Config is the whole planner service configuration after parsing and
// defaulting. Durations are parsed; a Config returned by Load is valid.
type Config struct {
	// LogLevel is the go-hclog level name (trace, debug, info, warn, error).
	LogLevel string
	// BindAddr and Port are where the HTTP API listens.
	BindAddr string
	Port     int
	// DryRun makes the planner log and serve its plan without writing to Nomad.
	DryRun bool

	Nomad    Nomad
	Consul   Consul
	Policy   Policy
	Capacity Capacity
	Progress Progress
	UI       UI
	// Queues are the team queues (none: one pool, as before queues).
	Queues queue.Config
	// QueueRightsize is each queue's rightsize setting, by queue name
	// (only the queues that set it): "apply" lets the planner apply
	// right-sizing to the queue's jobs that do not say otherwise in their
	// caravan_rightsize meta.
	QueueRightsize map[string]string
	// Packing is live introspective packing (off by default).
	Packing Packing
}

// Nomad is how the planner reaches Nomad. Empty fields keep the value from
// the NOMAD_* environment (the nomad/api defaults).
type Nomad struct {
	Address       string
	Region        string
	Namespace     string // "*" watches every namespace the token can read
	Token         string
	CACert        string
	ClientCert    string
	ClientKey     string
	TLSServerName string
	TLSSkipVerify bool
	// BlockingWait bounds one long-poll (WaitTime of the blocking query).
	BlockingWait time.Duration
}

// Consul is how the planner registers itself and elects a leader. With
// Enabled false the planner runs alone and is always the leader.
type Consul struct {
	Enabled       bool
	Address       string
	Token         string
	Datacenter    string
	CACert        string
	ClientCert    string
	ClientKey     string
	TLSSkipVerify bool
	ServiceName   string
	ServiceID     string
	// ServiceAddress is advertised in the catalog (defaults to BindAddr).
	ServiceAddress string
	CheckInterval  time.Duration
	LockKey        string
	SessionTTL     time.Duration
	LockDelay      time.Duration
}

// Policy tunes the decision loop.
type Policy struct {
	// Name selects the allocation policy (see planner/policy).
	Name string
	// Interval between decision rounds.
	Interval time.Duration
	// Cooldown is the minimum time between two changes of one job.
	Cooldown time.Duration
	// RestartCost is what a change costs a running job (a checkpoint and a
	// restore); a change must save more remaining time than this.
	RestartCost time.Duration
	// MaxChangesPerRound bounds the number of job updates one round submits.
	MaxChangesPerRound int
	// MinGain is the smallest predicted saving (seconds) worth a change.
	MinGain float64
	// SuspendQuantum is the time slice under overload (Gandiva): a job that
	// (re)started less than this ago is not suspended, and a job past it
	// queues behind the jobs waiting since before its slice began.
	SuspendQuantum time.Duration
	// PlacementAffinity registers, with each resize, an affinity for the
	// nodes the policy placed the job on (a second job version per resize;
	// Nomad applies it in place, steering where new workers land).
	PlacementAffinity bool
}

// Capacity tells the planner how many GPUs (and GPU shares) the cluster has.
type Capacity struct {
	// Device is the Nomad device name ("type", "vendor/type" or
	// "vendor/type/name", matched as a jobspec device block matches) whose
	// healthy instances are GPU shares; each device group is one GPU.
	Device string
	// SharesPerGPU, when positive, says how many shares make one GPU
	// (default: the instances of the node's largest matching device group).
	SharesPerGPU int
	// GPUsPerNode, when positive, gives every ready node that many GPUs
	// instead of discovering them (for clusters without the device plugin).
	GPUsPerNode int
}

// Progress configures the progress ingestion endpoint.
type Progress struct {
	// JWKSURL is where Nomad publishes its workload identity keys. Empty
	// means <nomad address>/.well-known/jwks.json.
	JWKSURL string
	// Audience, when set, must appear in the token's aud claim.
	Audience string
	// Issuer, when set, must equal the token's iss claim.
	Issuer string
	// MaxSamples bounds the samples kept per job.
	MaxSamples int
	// JWKSMaxAge bounds how long a fetched JWKS is trusted: a key removed
	// from Nomad's key set is refused within about this long.
	JWKSMaxAge time.Duration
	// RefuseWithoutACLs refuses every progress report when Nomad enforces
	// no ACLs (no token can be verified then); false accepts the token's
	// claims unverified and logs an error saying so (planner/README.md).
	RefuseWithoutACLs bool
}

// Bounds of progress.jwks_max_age: at most 5 minutes (the promise to an
// operator who removes a key), at least 10 s (each refresh reads Nomad).
const (
	MinJWKSMaxAge = 10 * time.Second
	MaxJWKSMaxAge = 5 * time.Minute
)

// UI configures the planner's web page at /ui.
type UI struct {
	// Enabled serves /ui (default true).
	Enabled bool
	// Token, when set, is required to read the page: as a bearer token,
	// or once as ?token= (which sets a cookie). Empty: reads are open, as
	// with the JSON API.
	Token string
	// StatsInterval is how long the cluster view (nodes, allocations and
	// their per-share GPU stats, read from Nomad) is cached.
	StatsInterval time.Duration
}

// MinUITokenLength is the shortest ui.token accepted.
const MinUITokenLength = 16

// Default returns the configuration used when nothing is set.
func Default() *Config {
	return &Config{
		LogLevel: "info",
		BindAddr: "127.0.0.1",
		Port:     8095,
		Nomad: Nomad{
			Namespace:    "*",
			BlockingWait: 5 * time.Minute,
		},
		Consul: Consul{
			Enabled:       true,
			ServiceName:   "caravan-planner",
			CheckInterval: 2 * time.Second,
			LockKey:       "caravan/planner/leader",
			SessionTTL:    10 * time.Second,
			LockDelay:     0,
		},
		Policy: Policy{
			Name:               policy.Best, // the docs and jobspecs/planner.nomad.hcl say the same (default_policy_test.go)
			Interval:           60 * time.Second,
			Cooldown:           5 * time.Minute,
			RestartCost:        30 * time.Second,
			MaxChangesPerRound: 4,
			MinGain:            1,
			SuspendQuantum:     10 * time.Minute,
		},
		Capacity: Capacity{Device: "gpu"},
		Progress: Progress{Audience: "caravan-planner", MaxSamples: 2000, JWKSMaxAge: MaxJWKSMaxAge},
		UI:       UI{Enabled: true, StatsInterval: 10 * time.Second},
		Packing:  DefaultPacking(),
	}
}

// Validate reports every invalid field, naming it.
// Bounds on settings: far beyond any sensible value, they turn a typo (or
// `max_samples = 1e18`, which would let tasks grow the planner's memory
// without limit) into a clear error.
const (
	MaxDuration        = 7 * 24 * time.Hour
	MaxMinGain         = 1e9
	MaxSamples         = 1_000_000
	MaxSharesPerGPU    = 4096
	MaxGPUsPerNode     = 1024
	MaxChangesPerRound = 10_000
)

func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Port < 0 || c.Port > 65535 {
		bad("port", "must be in 0..65535, got %d", c.Port)
	}
	if c.BindAddr == "" {
		bad("bind_addr", "must not be empty")
	}
	if !slices.Contains(cli.LogLevels, strings.ToLower(c.LogLevel)) {
		bad("log_level", "must be one of %s, got %q", strings.Join(cli.LogLevels, ", "), c.LogLevel)
	}
	if c.Nomad.BlockingWait <= 0 {
		bad("nomad.blocking_wait", "must be positive")
	}
	durations := []struct {
		field string
		d     time.Duration
	}{
		{"nomad.blocking_wait", c.Nomad.BlockingWait}, {"policy.interval", c.Policy.Interval},
		{"policy.cooldown", c.Policy.Cooldown}, {"policy.restart_cost", c.Policy.RestartCost},
		{"policy.suspend_quantum", c.Policy.SuspendQuantum}, {"consul.check_interval", c.Consul.CheckInterval},
		{"consul.lock_delay", c.Consul.LockDelay},
	}
	for _, d := range durations {
		if d.d > MaxDuration {
			bad(d.field, "must be at most %s, got %s", MaxDuration, d.d)
		}
	}
	validateConsul(c.Consul, bad)
	validatePolicy(c.Policy, bad)
	validateCapacity(c.Capacity, bad)
	if c.Progress.JWKSMaxAge < MinJWKSMaxAge || c.Progress.JWKSMaxAge > MaxJWKSMaxAge {
		bad("progress.jwks_max_age", "must be in %s..%s, got %s", MinJWKSMaxAge, MaxJWKSMaxAge, c.Progress.JWKSMaxAge)
	}
	if c.Progress.MaxSamples < 10 || c.Progress.MaxSamples > MaxSamples {
		bad("progress.max_samples", "must be in 10..%d, got %d", MaxSamples, c.Progress.MaxSamples)
	}
	validateUI(c.UI, bad)
	validatePacking(c.Packing, bad)
	if c.Queues.Enabled() || c.Queues.Default != "" {
		// Only what is wrong at any cluster size: each round scales
		// guarantees above the live cluster (queue.EffectiveGuarantees).
		if err := c.Queues.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// validateConsul checks the consul block when it is enabled.
func validateConsul(c Consul, bad func(field, format string, args ...any)) {
	if !c.Enabled {
		return
	}
	if c.ServiceName == "" {
		bad("consul.service_name", "must not be empty")
	}
	if c.LockKey == "" {
		bad("consul.lock_key", "must not be empty")
	}
	if c.SessionTTL < 10*time.Second || c.SessionTTL > 24*time.Hour {
		bad("consul.session_ttl", "must be between 10s and 24h (Consul's limits), got %s", c.SessionTTL)
	}
	if c.CheckInterval <= 0 {
		bad("consul.check_interval", "must be positive")
	}
	if c.LockDelay < 0 {
		bad("consul.lock_delay", "must not be negative")
	}
}

// validatePolicy checks the policy block.
func validatePolicy(p Policy, bad func(field, format string, args ...any)) {
	if p.Interval <= 0 {
		bad("policy.interval", "must be positive")
	}
	if p.Cooldown < 0 {
		bad("policy.cooldown", "must not be negative")
	}
	if p.RestartCost < 0 {
		bad("policy.restart_cost", "must not be negative")
	}
	if p.MaxChangesPerRound < 1 || p.MaxChangesPerRound > MaxChangesPerRound {
		bad("policy.max_changes_per_round", "must be in 1..%d, got %d", MaxChangesPerRound, p.MaxChangesPerRound)
	}
	if math.IsNaN(p.MinGain) || p.MinGain < 0 || p.MinGain > MaxMinGain {
		bad("policy.min_gain", "must be in 0..%g, got %v", MaxMinGain, p.MinGain)
	}
	if p.SuspendQuantum <= 0 {
		bad("policy.suspend_quantum", "must be positive")
	}
}

// validateCapacity checks the capacity block.
func validateCapacity(c Capacity, bad func(field, format string, args ...any)) {
	if c.SharesPerGPU < 0 || c.SharesPerGPU > MaxSharesPerGPU {
		bad("capacity.shares_per_gpu", "must be in 0..%d, got %d", MaxSharesPerGPU, c.SharesPerGPU)
	}
	if c.GPUsPerNode < 0 || c.GPUsPerNode > MaxGPUsPerNode {
		bad("capacity.gpus_per_node", "must be in 0..%d, got %d", MaxGPUsPerNode, c.GPUsPerNode)
	}
	if c.GPUsPerNode == 0 && c.Device == "" {
		bad("capacity", "set device (discovery) or gpus_per_node (fixed)")
	}
	if c.GPUsPerNode > 0 && c.SharesPerGPU == 0 {
		bad("capacity.shares_per_gpu", "must be set with gpus_per_node")
	}
}

func validateUI(u UI, bad func(field, format string, args ...any)) {
	if u.StatsInterval < time.Second || u.StatsInterval > time.Hour {
		bad("ui.stats_interval", "must be between 1s and 1h, got %s", u.StatsInterval)
	}
	if u.Token == "" {
		return
	}
	if len(u.Token) < MinUITokenLength {
		bad("ui.token", "must be at least %d characters, got %d", MinUITokenLength, len(u.Token))
	}
	if strings.ContainsFunc(u.Token, func(r rune) bool { return r <= ' ' || r == 0x7f || r > '~' }) {
		bad("ui.token", "must be printable ASCII without spaces (it travels in a header, a URL and a cookie)")
	}
}
