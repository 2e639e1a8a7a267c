package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// runMainEnv makes the test binary run main() instead of the tests, so a
// test can run `caravan ARGS...` as a process (exit status and output as
// a user sees them) without building the binary.
const runMainEnv = "CARAVAN_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// subSubcommands are the subcommands of subcommands, each with its own -h.
var subSubcommands = map[string][]string{
	"checkpoint": {"list", "show", "delete", "gc", "migrate"},
	"planner":    {"simulate", "report", "relay"},
	"trainer":    {"ps", "worker"},
}

// TestHelp_EverySubcommand: `caravan <cmd> -h` and `caravan <cmd> <sub> -h`
// exit 0 and print one usage, once.
func TestHelp_EverySubcommand(t *testing.T) {
	var cmds [][]string
	for _, name := range order {
		cmds = append(cmds, []string{name})
		for _, sub := range subSubcommands[name] {
			cmds = append(cmds, []string{name, sub})
		}
	}
	must.Eq(t, len(subcommands), len(order))
	usageLine := regexp.MustCompile(`(?im)^usage( of |: )`)
	for _, cmd := range cmds {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			c := exec.Command(os.Args[0], append(cmd, "-h")...)
			c.Env = append(os.Environ(), runMainEnv+"=1")
			var out bytes.Buffer
			c.Stdout, c.Stderr = &out, &out
			err := c.Run()
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				t.Fatalf("exit status %d:\n%s", exit.ExitCode(), out.String())
			}
			must.NoError(t, err)
			must.Len(t, 1, usageLine.FindAllString(out.String(), -1), must.Sprint(out.String()))
			if sub := cmd[len(cmd)-1]; len(cmd) > 1 {
				must.StrContains(t, out.String(), "caravan "+cmd[0]+" "+sub)
			}
		})
	}
}

// TestHelp_CheckpointFlagsPerCommand: each checkpoint command's -h lists
// its own flags only.
func TestHelp_CheckpointFlagsPerCommand(t *testing.T) {
	own := map[string][]string{"list": {"-json"}, "show": {"-json"}, "delete": {"-gc", "-generation"}, "gc": nil, "migrate": {"-to-store-config"}}
	all := []string{"-json", "-gc", "-generation", "-to-store-config"}
	for sub, flags := range own {
		t.Run(sub, func(t *testing.T) {
			c := exec.Command(os.Args[0], "checkpoint", sub, "-h")
			c.Env = append(os.Environ(), runMainEnv+"=1")
			out, err := c.CombinedOutput()
			must.NoError(t, err, must.Sprint(string(out)))
			for _, f := range all {
				listed := strings.Contains(string(out), "  "+f+" ") || strings.Contains(string(out), "  "+f+"\n")
				must.Eq(t, contains(flags, f), listed, must.Sprintf("%s in\n%s", f, out))
			}
		})
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestHelp_TrainerOneDefaultPerFlag: no flag of `caravan trainer -h`
// states two defaults.
func TestHelp_TrainerOneDefaultPerFlag(t *testing.T) {
	for _, args := range [][]string{{"trainer", "-h"}, {"trainer", "ps", "-h"}, {"trainer", "worker", "-h"}} {
		c := exec.Command(os.Args[0], args...)
		c.Env = append(os.Environ(), runMainEnv+"=1", "CARAVAN_CHECKPOINT_DIR=/tmp/ckpt", "CARAVAN_CHECKPOINT_SIGNAL=SIGUSR2")
		out, err := c.CombinedOutput()
		must.NoError(t, err, must.Sprint(string(out)))
		for _, flagHelp := range strings.Split(string(out), "\n  -") {
			must.LessEq(t, 1, strings.Count(flagHelp, "(default"), must.Sprintf("%v: %s", args, flagHelp))
		}
	}
}
