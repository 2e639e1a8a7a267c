// Package validate is `caravan validate FILE`: it checks what Nomad's
// servers cannot, because they do not know caravan's plugins, before
// `nomad job run`: the caravan task driver's config blocks, the caravan GPU
// share device requests, and the planner's caravan_* job meta. A jobspec is
// parsed locally (HCL2, with variables, as `nomad job run` does), with no
// Nomad agent, and every error is reported at once, each naming its field;
// warnings are kept apart from errors. A planner config file is checked
// with the planner's own loader (plannerconfig.go).
//
// It composes the checks the parts export (driver.ValidateJobTask and
// JobWarnings, device.CheckRequest and RequestWarnings, source.Validate,
// the planner's config.Load), which never import each other.
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

const usage = `usage: caravan validate [-var 'key=value']... [-var-file FILE]... [-planner-config FILE]... FILE...

Checks each jobspec (HCL2) for what Nomad's servers accept but caravan's
plugins refuse after placement, and reports every error at once:

  - the config block of every task with driver = "caravan" (command, work_dir,
    oom_score_adj, cgroup overrides and the checkpoint block: signal,
    interval, timeout, on_restore_error, scope, key; unknown attributes,
    without hiding the other errors of the block);
  - across tasks: a checkpoint.role task's checkpoint.task (a main task of
    its group) and its lifecycle hook, and the store key of every
    checkpointing task, as the driver checks them when the task starts;
  - every device block meant for caravan's GPU shares (caravan/gpushare):
    its name, count and the attributes its constraints and affinities use;
  - the job's caravan_* meta, as the planner reads it (unknown keys too, and
    caravan_* keys in group or task meta, which the planner never reads).
  - a volume or mount over the checkpoint directory of a task that caravan
    checkpoint.role tasks checkpoint (its checkpoints would be lost).

A planner config file (given with -planner-config, or any FILE with the
planner's blocks, such as queue, and no job block) is checked with the
planner's own loader: HCL, values and queues, every error at once.

Errors are what a plugin or the planner would refuse or ignore; warnings
what would go wrong without a refusal (a reschedule policy that ends
training after a few moves, a share count only some plugin configs can
place). Each file gets one line saying how many of each, then one line
per finding, "error:" or "warning:".

Variables are given as to 'nomad job run': -var, -var-file and NOMAD_VAR_*
environment variables. No Nomad agent is needed.

Exit status: 0 when no file has an error (warnings do not count), 1 when
one has, 2 on bad usage.

Examples, from the repository root:

  caravan validate jobspecs/train-checkpointed.nomad.hcl jobspecs/gpu-fraction.nomad.hcl
  caravan validate -var caravan_bin=$PWD/build/caravan jobspecs/planner.nomad.hcl
  caravan validate -var caravan_bin=$PWD/build/caravan -var state_dir=/tmp/caravan-sim jobspecs/planner-train-sim.nomad.hcl
  caravan validate -planner-config validate/testdata/planner-queues.hcl

Flags:
`

// Main runs the command with the process's streams and environment.
func Main(args []string) int { return Run(args, os.Stdout, os.Stderr, os.Environ()) }

// Run runs `caravan validate args...` with environ (for NOMAD_VAR_*).
func Run(args []string, stdout, stderr io.Writer, environ []string) int {
	fs := flag.NewFlagSet("caravan validate", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // -h and errors are printed below, once
	var vars, varFiles, plannerConfigs listFlag
	fs.Var(&vars, "var", "a jobspec variable, key=value (repeatable)")
	fs.Var(&varFiles, "var-file", "a file of jobspec variables (HCL or JSON; repeatable)")
	fs.Var(&plannerConfigs, "planner-config", "a planner config file (`caravan planner -config`) to check (repeatable)")
	strict := fs.Bool("hcl2-strict", true, "as nomad job run: a -var or -var-file variable the jobspec does not declare is an error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(stderr, "caravan validate: %v (see -h)\n", err)
		return 2
	}
	if fs.NArg() == 0 && len(plannerConfigs) == 0 {
		fmt.Fprintln(stderr, "caravan validate: no FILE given (see -h)")
		return 2
	}
	v := Vars{Args: vars, Files: varFiles, Environ: environ, Strict: *strict}
	code := 0
	for _, path := range plannerConfigs {
		if report(stdout, path, Result{Errors: PlannerConfig(path)}) {
			code = 1
		}
	}
	for _, path := range fs.Args() {
		if report(stdout, path, Check(path, v)) {
			code = 1
		}
	}
	return code
}

// report prints a file's result and says whether it holds an error.
func report(w io.Writer, path string, r Result) bool {
	fmt.Fprintf(w, "%s: %s\n", path, r.Summary())
	for _, err := range r.Errors {
		fmt.Fprintf(w, "  error: %v\n", err)
	}
	for _, warning := range r.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", warning)
	}
	return len(r.Errors) > 0
}

// Result is what validate finds in one file.
type Result struct {
	// Errors are what a plugin or the planner would refuse or ignore.
	Errors []error
	// Warnings are what would go wrong without a refusal.
	Warnings []string
}

// Summary is "ok", or how many errors and warnings: "2 errors, 1 warning".
func (r Result) Summary() string {
	if len(r.Errors) == 0 && len(r.Warnings) == 0 {
		return "ok"
	}
	var parts []string
	if len(r.Errors) > 0 {
		parts = append(parts, plural(len(r.Errors), "error"))
	} else {
		parts = append(parts, "ok")
	}
	if len(r.Warnings) > 0 {
		parts = append(parts, plural(len(r.Warnings), "warning"))
	}
	return strings.Join(parts, ", ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// Vars are a jobspec's variables, given as to `nomad job run`.
type Vars struct {
	// Args are -var key=value; Files -var-file paths; Environ the process
	// environment (NOMAD_VAR_*).
	Args, Files, Environ []string
	// Strict refuses variables the jobspec does not declare.
	Strict bool
}

// Check checks the file at path: a planner config file (IsPlannerConfig)
// with the planner's loader, else a jobspec with the variables given.
func Check(path string, v Vars) Result {
	if IsPlannerConfig(path) {
		return Result{Errors: PlannerConfig(path)}
	}
	job, errs := parseJob(path, v)
	if job == nil {
		return Result{Errors: errs}
	}
	return Result{Errors: Job(job), Warnings: Warnings(job)}
}

// File parses the jobspec at path with the variables given and returns
// every error it holds.
func File(path string, v Vars) []error {
	job, errs := parseJob(path, v)
	if job == nil {
		return errs
	}
	return Job(job)
}

// parseJob parses the jobspec at path as `nomad job run` does; on failure
// the job is nil and the errors say why.
func parseJob(path string, v Vars) (*nomadapi.Job, []error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, []error{fmt.Errorf("FILE: %w", err)}
	}
	job, err := jobspec2.ParseWithConfig(&jobspec2.ParseConfig{
		Path: path, Body: body, ArgVars: v.Args, VarFiles: v.Files, Envs: v.Environ, AllowFS: true, Strict: v.Strict,
	})
	if err != nil {
		return nil, parseErrors(err)
	}
	return job, nil
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
				for _, err := range driver.ValidateJobTask(job, group, task) {
					errs = append(errs, fmt.Errorf("%s config: %w", where, err))
				}
			}
			errs = append(errs, deviceErrors(where, task)...)
		}
	}
	return errs
}

// Warnings returns what would go wrong with a parsed job without a
// refusal: the driver's (driver.JobWarnings) and the GPU share requests'
// (device.RequestWarnings).
func Warnings(job *nomadapi.Job) []string {
	out := driver.JobWarnings(job)
	for _, tg := range job.TaskGroups {
		group := ""
		if tg.Name != nil {
			group = *tg.Name
		}
		for _, task := range tg.Tasks {
			for _, r := range deviceRequests(task) {
				for _, w := range device.RequestWarnings(r) {
					out = append(out, fmt.Sprintf("group %q task %q device %q %s", group, task.Name, r.Name, w))
				}
			}
		}
	}
	return out
}

// deviceErrors checks the task's device blocks meant for caravan's shares.
func deviceErrors(where string, task *nomadapi.Task) []error {
	var errs []error
	for _, r := range deviceRequests(task) {
		for _, err := range device.CheckRequest(r) {
			errs = append(errs, fmt.Errorf("%s device %q %w", where, r.Name, err))
		}
	}
	return errs
}

// deviceRequests are the task's device blocks meant for caravan's shares.
func deviceRequests(task *nomadapi.Task) []device.Request {
	if task.Resources == nil {
		return nil
	}
	var out []device.Request
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
		out = append(out, r)
	}
	return out
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
