// Package validate is `caravan validate JOBSPEC`: it checks what Nomad's
// servers cannot, because they do not know caravan's plugins, before
// `nomad job run`: the caravan task driver's config blocks, the caravan GPU
// share device requests, and the planner's caravan_* job meta. A jobspec is
// parsed locally (HCL2, with variables, as `nomad job run` does), with no
// Nomad agent, and every error is reported at once, each naming its field.
//
// It composes the checks the parts export (driver.ValidateTaskConfig,
// device.CheckRequest, source.Validate), which never import each other.
package validate

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/jobspec2"

	"github.com/caravan-nomad/caravan/device"
	"github.com/caravan-nomad/caravan/driver"
	"github.com/caravan-nomad/caravan/planner/service/source"
)

// DriverName is the task driver name jobspecs use for caravan's driver.
const DriverName = "caravan"

const usage = `usage: caravan validate [-var 'key=value']... [-var-file FILE]... JOBSPEC...

Checks each jobspec (HCL2) for what Nomad's servers accept but caravan's
plugins refuse after placement, and reports every error at once:

  - the config block of every task with driver = "caravan" (command, work_dir,
    oom_score_adj, cgroup overrides and the checkpoint block: signal,
    interval, timeout, on_restore_error, scope, key; unknown attributes);
  - every device block meant for caravan's GPU shares (caravan/gpushare):
    its name, count and the attributes its constraints and affinities use;
  - the job's caravan_* meta, as the planner reads it (unknown keys too, and
    caravan_* keys in group or task meta, which the planner never reads).
  - a volume or mount over the checkpoint directory of a task that caravan
    checkpoint.role tasks checkpoint (its checkpoints would be lost).

Variables are given as to 'nomad job run': -var, -var-file and NOMAD_VAR_*
environment variables. No Nomad agent is needed.

Exit status: 0 when every jobspec is valid, 1 when one is not, 2 on bad usage.

Examples, from the repository root:

  caravan validate jobspecs/train-checkpointed.nomad.hcl jobspecs/gpu-fraction.nomad.hcl
  caravan validate -var caravan_bin=$PWD/build/caravan jobspecs/planner.nomad.hcl
  caravan validate -var caravan_bin=$PWD/build/caravan -var state_dir=/tmp/caravan-sim jobspecs/planner-train-sim.nomad.hcl

Flags:
`

// Main runs the command with the process's streams and environment.
func Main(args []string) int { return Run(args, os.Stdout, os.Stderr, os.Environ()) }

// Run runs `caravan validate args...` with environ (for NOMAD_VAR_*).
func Run(args []string, stdout, stderr io.Writer, environ []string) int {
	fs := flag.NewFlagSet("caravan validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var vars, varFiles listFlag
	fs.Var(&vars, "var", "a jobspec variable, key=value (repeatable)")
	fs.Var(&varFiles, "var-file", "a file of jobspec variables (HCL or JSON; repeatable)")
	strict := fs.Bool("hcl2-strict", true, "as nomad job run: a -var or -var-file variable the jobspec does not declare is an error")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "caravan validate: no JOBSPEC given (see -h)")
		return 2
	}
	code := 0
	for _, path := range fs.Args() {
		errs := File(path, Vars{Args: vars, Files: varFiles, Environ: environ, Strict: *strict})
		if len(errs) == 0 {
			fmt.Fprintf(stdout, "%s: ok\n", path)
			continue
		}
		code = 1
		fmt.Fprintf(stdout, "%s: %d error(s)\n", path, len(errs))
		for _, err := range errs {
			fmt.Fprintf(stdout, "  - %v\n", err)
		}
	}
	return code
}

// Vars are a jobspec's variables, given as to `nomad job run`.
type Vars struct {
	// Args are -var key=value; Files -var-file paths; Environ the process
	// environment (NOMAD_VAR_*).
	Args, Files, Environ []string
	// Strict refuses variables the jobspec does not declare.
	Strict bool
}

// File parses the jobspec at path with the variables given and returns
// every error it holds.
func File(path string, v Vars) []error {
	body, err := os.ReadFile(path)
	if err != nil {
		return []error{fmt.Errorf("JOBSPEC: %w", err)}
	}
	job, err := jobspec2.ParseWithConfig(&jobspec2.ParseConfig{
		Path: path, Body: body, ArgVars: v.Args, VarFiles: v.Files, Envs: v.Environ, AllowFS: true, Strict: v.Strict,
	})
	if err != nil {
		return parseErrors(err)
	}
	return Job(job)
}

// Job returns every error of a parsed job's caravan parts.
func Job(job *nomadapi.Job) []error {
	var errs []error
	for _, err := range source.Validate(job) {
		errs = append(errs, fmt.Errorf("job meta: %w", err))
	}
	for _, tg := range job.TaskGroups {
		group := ""
		if tg.Name != nil {
			group = *tg.Name
		}
		for _, task := range tg.Tasks {
			where := fmt.Sprintf("group %q task %q", group, task.Name)
			if task.Driver == DriverName {
				for _, err := range driver.ValidateTaskConfig(task.Config) {
					errs = append(errs, fmt.Errorf("%s config: %w", where, err))
				}
			}
			errs = append(errs, deviceErrors(where, task)...)
		}
	}
	return append(errs, checkpointMountErrors(job)...)
}

// deviceErrors checks the task's device blocks meant for caravan's shares.
func deviceErrors(where string, task *nomadapi.Task) []error {
	if task.Resources == nil {
		return nil
	}
	var errs []error
	for _, d := range task.Resources.Devices {
		if d == nil || !device.ClaimsRequest(d.Name) {
			continue
		}
		r := device.Request{Name: d.Name, Count: 1}
		if d.Count != nil {
			r.Count = *d.Count
		}
		for _, c := range d.Constraints {
			r.Constraints = append(r.Constraints, device.RequestTerm{Attribute: c.LTarget, Operator: c.Operand, Value: c.RTarget})
		}
		for _, a := range d.Affinities {
			r.Affinities = append(r.Affinities, device.RequestTerm{Attribute: a.LTarget, Operator: a.Operand, Value: a.RTarget})
		}
		for _, err := range device.CheckRequest(r) {
			errs = append(errs, fmt.Errorf("%s device %q %w", where, d.Name, err))
		}
	}
	return errs
}

// parseErrors splits a jobspec parser's error (HCL diagnostics, one per
// line or joined with ", ") into one error per problem.
func parseErrors(err error) []error {
	var out []error
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "<nil>: ")
		if line != "" {
			out = append(out, fmt.Errorf("parse: %s", line))
		}
	}
	return out
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ", ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }
