package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/caravan-nomad/caravan/internal/cli"
)

// Flags are the command-line options. Load applies them after the files.
type Flags struct {
	Configs       []string
	set           map[string]bool
	bindAddr      string
	port          int
	dryRun        bool
	logLevel      string
	nomadAddr     string
	consulAddr    string
	consulEnabled bool
	serviceID     string
}

type multiString struct{ values *[]string }

func (m multiString) String() string {
	if m.values == nil {
		return ""
	}
	return strings.Join(*m.values, ",")
}
func (m multiString) Set(v string) error { *m.values = append(*m.values, v); return nil }

// ParseFlags parses `caravan planner` arguments. Output (usage, errors) goes
// to out.
func ParseFlags(args []string, out io.Writer) (*Flags, error) {
	f := &Flags{}
	fs := flag.NewFlagSet("caravan planner", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Var(multiString{&f.Configs}, "config", "HCL config file (repeatable; later files win)")
	fs.StringVar(&f.bindAddr, "bind-addr", "", "address the HTTP API listens on")
	fs.IntVar(&f.port, "port", 0, "port the HTTP API listens on (0 in a config file means any free port)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "decide and serve the plan, but never write to Nomad")
	fs.StringVar(&f.logLevel, "log-level", "", "log level: trace, debug, info, warn, error")
	fs.StringVar(&f.nomadAddr, "nomad-address", "", "Nomad HTTP address (overrides NOMAD_ADDR and the file)")
	fs.StringVar(&f.consulAddr, "consul-address", "", "Consul HTTP address (overrides CONSUL_HTTP_ADDR and the file)")
	fs.BoolVar(&f.consulEnabled, "consul", true, "register in Consul and elect a leader (false: run alone as leader)")
	fs.StringVar(&f.serviceID, "service-id", "", "Consul service ID of this instance (default: name-host-port)")
	fs.Usage = func() {
		fmt.Fprint(out, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	c := cli.For(fs)
	c.NoArgs()
	if c.Set("log-level") {
		c.OneOf("log-level", strings.ToLower(f.logLevel), cli.LogLevels...)
	}
	if c.Set("port") {
		c.Between("port", f.port, 0, 65535)
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	return f, nil
}

const usage = `Usage: caravan planner [options]
       caravan planner <subcommand> [options]

Runs the live planner service (see planner/README.md).

Subcommands:
  simulate   replay a workload through the planner's policies (caravan planner simulate -h)
  report     send one progress report from a task (caravan planner report -h)
  relay      follow a task's log and report its progress lines (caravan planner relay -h)

Options:
`

func (f *Flags) apply(c *Config) {
	if f.set["bind-addr"] {
		c.BindAddr = f.bindAddr
	}
	if f.set["port"] {
		c.Port = f.port
	}
	if f.set["dry-run"] {
		c.DryRun = f.dryRun
	}
	if f.set["log-level"] {
		c.LogLevel = f.logLevel
	}
	if f.set["nomad-address"] {
		c.Nomad.Address = f.nomadAddr
	}
	if f.set["consul-address"] {
		c.Consul.Address = f.consulAddr
	}
	if f.set["consul"] {
		c.Consul.Enabled = f.consulEnabled
	}
	if f.set["service-id"] {
		c.Consul.ServiceID = f.serviceID
	}
}

// Load builds the configuration: defaults, then each config file in order,
// then flags; and validates it. Every error of every file and of the
// validation is reported at once (errors.Join, one line each). Environment variables (NOMAD_*, CONSUL_*)
// fill whatever remains empty when the API clients are built.
func Load(f *Flags) (*Config, error) {
	c := Default()
	var errs []error
	for _, path := range f.Configs {
		errs = append(errs, ParseFile(c, path))
	}
	f.apply(c)
	errs = append(errs, c.Validate())
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("invalid config: %w", err)
	}
	return c, nil
}
