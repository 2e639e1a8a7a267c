// Command caravan is one binary for the three parts of caravan: the
// fractional-GPU device plugin, the checkpointing task driver and the
// Optimus planner. Nomad starts the plugins through `plugin` blocks whose
// args name the subcommand.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/caravan-nomad/caravan/demo"
	"github.com/caravan-nomad/caravan/device"
	"github.com/caravan-nomad/caravan/driver"
	"github.com/caravan-nomad/caravan/driver/store/ckptcmd"
	"github.com/caravan-nomad/caravan/internal/cli"
	"github.com/caravan-nomad/caravan/internal/version"
	"github.com/caravan-nomad/caravan/planner/service"
	"github.com/caravan-nomad/caravan/planner/simulator"
	"github.com/caravan-nomad/caravan/progress/relay"
	"github.com/caravan-nomad/caravan/progress/report"
	"github.com/caravan-nomad/caravan/testbed"
	"github.com/caravan-nomad/caravan/trainer"
	"github.com/caravan-nomad/caravan/validate"
)

// subcommand is one entry of the binary's command table.
type subcommand struct {
	summary string
	run     func(args []string) int
}

var subcommands = map[string]subcommand{
	"device":     {"serve the fractional-GPU device plugin (started by a Nomad client)", device.Main},
	"driver":     {"serve the checkpointing task driver (started by a Nomad client)", driver.Main},
	"checkpoint": {"list, show, delete or GC checkpoints, or migrate a directory store to S3 (operators)", ckptcmd.Main},
	"validate":   {"check a jobspec's caravan task config, GPU share requests and caravan_* meta before `nomad job run`, or a planner config file", validate.Main},
	"planner":    {"run the planner service, or `planner simulate` to replay a workload", plannerMain},
	"trainer":    {"run the deterministic example trainer (checkpoint protocol reference)", trainer.Main},
	"demo":       {"drive a running cluster through the demo scenario (make demo runs it)", demo.Main},
	"testbed":    {"run a training workload on a running cluster per policy; compare with the simulator", testbed.Main},
	"task-exec":  {"start a task's command in its work_dir with its oom_score_adj (the caravan driver's executor runs it)", func(args []string) int { return driver.TaskExecMain(args, os.Stderr) }},
	"version":    {"print the version", versionMain},
}

// plannerCommands are `caravan planner`'s own commands; `caravan planner`
// without one of them runs the planner service.
var plannerCommands = map[string]func(args []string) int{
	"simulate": simulator.Main,
	// One progress report from a task, and the sidecar that reports a
	// task's progress lines (progress/report, progress/relay).
	"report": func(args []string) int { return report.Main(args, os.Getenv, os.Stderr) },
	"relay":  func(args []string) int { return relay.Main(args, os.Getenv, os.Stderr) },
}

// plannerMain runs `caravan planner [simulate|report|relay] ...`.
func plannerMain(args []string) int {
	if len(args) > 0 {
		if run, ok := plannerCommands[args[0]]; ok {
			return run(args[1:])
		}
	}
	return service.Main(args)
}

var order = []string{"device", "driver", "checkpoint", "validate", "planner", "trainer", "demo", "testbed", "task-exec", "version"}

func versionMain(args []string) int {
	if cli.IsHelp(args) {
		fmt.Println("usage: caravan version\n\nPrints the version.")
		return 0
	}
	fmt.Println(version.String())
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: caravan <command> [args]\n\ncommands:\n")
	for _, name := range order {
		fmt.Fprintf(w, "  %-10s %s\n", name, subcommands[name].summary)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "-h", "-help", "--help", "help":
		usage(os.Stdout)
		return
	case "-v", "-version", "--version":
		os.Args[1] = "version"
	}
	cmd, ok := subcommands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "caravan: unknown command %q\n\n", os.Args[1])
		usage(os.Stderr)
		os.Exit(2)
	}
	os.Exit(cmd.run(os.Args[2:]))
}
