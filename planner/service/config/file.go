package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// fileConfig mirrors the HCL file. Every attribute is optional and a pointer,
// so that only what the file sets overrides the defaults and the environment.
type fileConfig struct {
	LogLevel *string       `hcl:"log_level,optional"`
	BindAddr *string       `hcl:"bind_addr,optional"`
	Port     *int          `hcl:"port,optional"`
	DryRun   *bool         `hcl:"dry_run,optional"`
	Nomad    *fileNomad    `hcl:"nomad,block"`
	Consul   *fileConsul   `hcl:"consul,block"`
	Policy   *filePolicy   `hcl:"policy,block"`
	Capacity *fileCapacity `hcl:"capacity,block"`
	Progress *fileProgress `hcl:"progress,block"`
	UI       *fileUI       `hcl:"ui,block"`
	Queue    []fileQueue   `hcl:"queue,block"`
	Queues   *fileQueues   `hcl:"queues,block"`
	Packing  *filePacking  `hcl:"packing,block"`
}

type fileUI struct {
	Enabled       *bool   `hcl:"enabled,optional"`
	Token         *string `hcl:"token,optional"`
	StatsInterval *string `hcl:"stats_interval,optional"`
}

type fileNomad struct {
	Address       *string `hcl:"address,optional"`
	Region        *string `hcl:"region,optional"`
	Namespace     *string `hcl:"namespace,optional"`
	Token         *string `hcl:"token,optional"`
	CACert        *string `hcl:"ca_cert,optional"`
	ClientCert    *string `hcl:"client_cert,optional"`
	ClientKey     *string `hcl:"client_key,optional"`
	TLSServerName *string `hcl:"tls_server_name,optional"`
	TLSSkipVerify *bool   `hcl:"skip_verify,optional"`
	BlockingWait  *string `hcl:"blocking_wait,optional"`
}

type fileConsul struct {
	Enabled        *bool   `hcl:"enabled,optional"`
	Address        *string `hcl:"address,optional"`
	Token          *string `hcl:"token,optional"`
	Datacenter     *string `hcl:"datacenter,optional"`
	CACert         *string `hcl:"ca_cert,optional"`
	ClientCert     *string `hcl:"client_cert,optional"`
	ClientKey      *string `hcl:"client_key,optional"`
	TLSSkipVerify  *bool   `hcl:"skip_verify,optional"`
	ServiceName    *string `hcl:"service_name,optional"`
	ServiceID      *string `hcl:"service_id,optional"`
	ServiceAddress *string `hcl:"service_address,optional"`
	CheckInterval  *string `hcl:"check_interval,optional"`
	LockKey        *string `hcl:"lock_key,optional"`
	SessionTTL     *string `hcl:"session_ttl,optional"`
	LockDelay      *string `hcl:"lock_delay,optional"`
}

type filePolicy struct {
	Name               *string  `hcl:"name,optional"`
	Interval           *string  `hcl:"interval,optional"`
	Cooldown           *string  `hcl:"cooldown,optional"`
	RestartCost        *string  `hcl:"restart_cost,optional"`
	MaxChangesPerRound *int     `hcl:"max_changes_per_round,optional"`
	MinGain            *float64 `hcl:"min_gain,optional"`
	SuspendQuantum     *string  `hcl:"suspend_quantum,optional"`
	PlacementAffinity  *bool    `hcl:"placement_affinity,optional"`
}

type fileCapacity struct {
	Device       *string `hcl:"device,optional"`
	SharesPerGPU *int    `hcl:"shares_per_gpu,optional"`
	GPUsPerNode  *int    `hcl:"gpus_per_node,optional"`
}

type fileProgress struct {
	JWKSURL    *string `hcl:"jwks_url,optional"`
	Audience   *string `hcl:"audience,optional"`
	Issuer     *string `hcl:"issuer,optional"`
	MaxSamples *int    `hcl:"max_samples,optional"`
	JWKSMaxAge *string `hcl:"jwks_max_age,optional"`
	// RefuseWithoutACLs: see Progress.RefuseWithoutACLs.
	RefuseWithoutACLs *bool `hcl:"refuse_without_acls,optional"`
}

// ParseFile reads an HCL config file and applies it on top of c.
func ParseFile(c *Config, path string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	return Parse(c, path, src)
}

// Parse applies HCL source (named filename in errors) on top of c. It
// reports every error at once: unknown or mistyped attributes, bad
// durations and bad queue amounts (errors.Join, one line each). Only a
// syntax error stops it there: the parser cannot read past it.
func Parse(c *Config, filename string, src []byte) error {
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return diagErrors("parsing config", diags, src)
	}
	var fc fileConfig
	var errs []error
	if diags := gohcl.DecodeBody(f.Body, nil, &fc); diags.HasErrors() {
		// What could be decoded is applied and checked too, so a typo
		// does not hide the errors of the rest of the file.
		errs = append(errs, diagErrors("decoding config", diags, src))
	}
	errs = append(errs, fc.apply(c, filename))
	return errors.Join(errs...)
}

func (fc *fileConfig) apply(c *Config, filename string) error {
	var errs []error
	dur := func(field string, s *string, dst *time.Duration) {
		if s == nil {
			return
		}
		d, perr := time.ParseDuration(*s)
		if perr != nil {
			errs = append(errs, fmt.Errorf("%s: %s: invalid duration %q: %w", filename, field, *s, perr))
			return
		}
		*dst = d
	}
	set(fc.LogLevel, &c.LogLevel)
	set(fc.BindAddr, &c.BindAddr)
	set(fc.Port, &c.Port)
	set(fc.DryRun, &c.DryRun)
	if n := fc.Nomad; n != nil {
		set(n.Address, &c.Nomad.Address)
		set(n.Region, &c.Nomad.Region)
		set(n.Namespace, &c.Nomad.Namespace)
		set(n.Token, &c.Nomad.Token)
		set(n.CACert, &c.Nomad.CACert)
		set(n.ClientCert, &c.Nomad.ClientCert)
		set(n.ClientKey, &c.Nomad.ClientKey)
		set(n.TLSServerName, &c.Nomad.TLSServerName)
		set(n.TLSSkipVerify, &c.Nomad.TLSSkipVerify)
		dur("nomad.blocking_wait", n.BlockingWait, &c.Nomad.BlockingWait)
	}
	if k := fc.Consul; k != nil {
		set(k.Enabled, &c.Consul.Enabled)
		set(k.Address, &c.Consul.Address)
		set(k.Token, &c.Consul.Token)
		set(k.Datacenter, &c.Consul.Datacenter)
		set(k.CACert, &c.Consul.CACert)
		set(k.ClientCert, &c.Consul.ClientCert)
		set(k.ClientKey, &c.Consul.ClientKey)
		set(k.TLSSkipVerify, &c.Consul.TLSSkipVerify)
		set(k.ServiceName, &c.Consul.ServiceName)
		set(k.ServiceID, &c.Consul.ServiceID)
		set(k.ServiceAddress, &c.Consul.ServiceAddress)
		dur("consul.check_interval", k.CheckInterval, &c.Consul.CheckInterval)
		set(k.LockKey, &c.Consul.LockKey)
		dur("consul.session_ttl", k.SessionTTL, &c.Consul.SessionTTL)
		dur("consul.lock_delay", k.LockDelay, &c.Consul.LockDelay)
	}
	if p := fc.Policy; p != nil {
		set(p.Name, &c.Policy.Name)
		dur("policy.interval", p.Interval, &c.Policy.Interval)
		dur("policy.cooldown", p.Cooldown, &c.Policy.Cooldown)
		dur("policy.restart_cost", p.RestartCost, &c.Policy.RestartCost)
		set(p.MaxChangesPerRound, &c.Policy.MaxChangesPerRound)
		set(p.MinGain, &c.Policy.MinGain)
		dur("policy.suspend_quantum", p.SuspendQuantum, &c.Policy.SuspendQuantum)
		set(p.PlacementAffinity, &c.Policy.PlacementAffinity)
	}
	if p := fc.Capacity; p != nil {
		set(p.Device, &c.Capacity.Device)
		set(p.SharesPerGPU, &c.Capacity.SharesPerGPU)
		set(p.GPUsPerNode, &c.Capacity.GPUsPerNode)
	}
	if p := fc.Progress; p != nil {
		set(p.JWKSURL, &c.Progress.JWKSURL)
		set(p.Audience, &c.Progress.Audience)
		set(p.Issuer, &c.Progress.Issuer)
		set(p.MaxSamples, &c.Progress.MaxSamples)
		set(p.RefuseWithoutACLs, &c.Progress.RefuseWithoutACLs)
		dur("progress.jwks_max_age", p.JWKSMaxAge, &c.Progress.JWKSMaxAge)
	}
	if p := fc.UI; p != nil {
		set(p.Enabled, &c.UI.Enabled)
		set(p.Token, &c.UI.Token)
		dur("ui.stats_interval", p.StatsInterval, &c.UI.StatsInterval)
	}
	fc.Packing.apply(&c.Packing)
	errs = append(errs, applyQueues(c, filename, fc.Queue, fc.Queues))
	return errors.Join(errs...)
}

func set[T any](src *T, dst *T) {
	if src != nil {
		*dst = *src
	}
}

// sourceError is an HCL diagnostic with the offending source line, so the
// message names the field even when HCL's own text does not.
type sourceError struct {
	diag *hcl.Diagnostic
	line string
}

func (e sourceError) Error() string {
	msg := e.diag.Error()
	if e.line != "" {
		msg += fmt.Sprintf(" (in %q)", e.line)
	}
	return msg
}

func (e sourceError) Unwrap() error { return e.diag }

// diagErrors is one error per diagnostic, each with its source line and
// prefixed with what was being done, joined.
func diagErrors(doing string, diags hcl.Diagnostics, src []byte) error {
	lines := strings.Split(string(src), "\n")
	var errs []error
	for _, d := range diags {
		e := sourceError{diag: d}
		if d.Subject != nil && d.Subject.Start.Line >= 1 && d.Subject.Start.Line <= len(lines) {
			e.line = strings.TrimSpace(lines[d.Subject.Start.Line-1])
		}
		errs = append(errs, fmt.Errorf("%s: %w", doing, e))
	}
	return errors.Join(errs...)
}
