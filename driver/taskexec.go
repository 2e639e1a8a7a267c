package driver

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/caravan-nomad/caravan/internal/cli"
)

// TaskExecCommand is the caravan subcommand that starts a task's command
// with the options Nomad's v1.6 executor (the last open-source one) cannot
// set: the executor runs `caravan task-exec -work-dir D -oom-score-adj N --
// CMD ARGS...` as the task's user, in its cgroup, and task-exec sets them
// and replaces itself with CMD (execve: same pid, same signals, CMD's own
// exit status).
const TaskExecCommand = "task-exec"

// launchSpec is what the executor is asked to run for a task.
type launchSpec struct {
	cmd  string
	args []string
}

// launchCommand returns tc's command as the executor should run it: as it
// is when no option needs task-exec, else through task-exec with the
// command resolved here by the executor's own rules (task local/, the task
// dir, an absolute host path, the PATH).
func launchCommand(tc *TaskConfig, taskDir string) (launchSpec, error) {
	if tc.WorkDir == "" && tc.OOMScoreAdj == 0 {
		return launchSpec{cmd: tc.Command, args: tc.Args}, nil
	}
	self, err := os.Executable()
	if err != nil {
		return launchSpec{}, fmt.Errorf("work_dir/oom_score_adj: find the caravan binary for task-exec: %w", err)
	}
	bin, err := resolveCommand(taskDir, tc.Command)
	if err != nil {
		return launchSpec{}, fmt.Errorf("command: %w", err)
	}
	args := []string{TaskExecCommand, "-work-dir", tc.WorkDir, "-oom-score-adj", strconv.Itoa(tc.OOMScoreAdj), "--", bin}
	return launchSpec{cmd: self, args: append(args, tc.Args...)}, nil
}

// resolveCommand finds bin as Nomad's executor does.
func resolveCommand(taskDir, bin string) (string, error) {
	for _, p := range []string{filepath.Join(taskDir, "local", bin), filepath.Join(taskDir, bin)} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if filepath.IsAbs(bin) {
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("binary %q could not be found", bin)
	}
	return p, nil
}

// TaskExecMain is `caravan task-exec`: it changes to -work-dir, sets
// -oom-score-adj, and executes the command after "--". It returns only on
// failure (exit status 127, the reason on stderr, so the task's stderr log
// says why the task did not start).
func TaskExecMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("caravan "+TaskExecCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	workDir := fs.String("work-dir", "", "directory to run the command in")
	oom := fs.Int("oom-score-adj", 0, "the command's oom_score_adj (0 to 1000)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: caravan %s [-work-dir DIR] [-oom-score-adj N] -- COMMAND [ARGS]...\n\n"+
			"Starts a caravan task's command in its work_dir with its oom_score_adj (the caravan driver's executor runs it).\n\nFlags:\n", TaskExecCommand)
		cli.PrintFlags(stderr, fs)
	}
	if err := fs.Parse(args); err != nil {
		return cli.ParseExit(err)
	}
	cmd := fs.Args()
	if len(cmd) == 0 {
		fmt.Fprintln(stderr, "caravan task-exec: no command after --")
		return 2
	}
	if err := taskExec(*workDir, *oom, cmd); err != nil {
		fmt.Fprintf(stderr, "caravan task-exec: %v\n", err)
		return 127
	}
	return 0 // not reached: exec replaced the process
}

func taskExec(workDir string, oom int, cmd []string) error {
	if workDir != "" {
		if err := os.Chdir(workDir); err != nil {
			return fmt.Errorf("work_dir: %w", err)
		}
	}
	if oom != 0 {
		if oom < 0 || oom > 1000 {
			return fmt.Errorf("oom_score_adj: %d is outside [0, 1000]", oom)
		}
		// Raising one's own score needs no privilege.
		if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(oom)), 0); err != nil {
			return fmt.Errorf("oom_score_adj: %w", err)
		}
	}
	err := syscall.Exec(cmd[0], cmd, os.Environ())
	return fmt.Errorf("exec %s: %w", cmd[0], err)
}
