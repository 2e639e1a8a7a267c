package driver

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"
)

// The executor of Nomad's v1.6 SDK cannot set a working directory or an
// oom_score_adj: caravan's task-exec does, and the task is still the
// command itself (exec), with its own exit status.
func TestDriver_WorkDirAndOOMScoreAdj(t *testing.T) {
	td := newTestDriver(t, "")
	wd := t.TempDir()
	cfg := newTask(t, td, "client1", &TaskConfig{
		Command: "sh", // found on the PATH, as the executor finds it
		Args:    []string{"-c", "echo cwd=$(pwd) oom=$(cat /proc/self/oom_score_adj) comm=$(cat /proc/$$/comm); exit 4"},
		WorkDir: wd, OOMScoreAdj: 737,
	})
	_, _, err := td.StartTask(cfg)
	must.NoError(t, err)
	must.Eq(t, 4, td.waitExit(t, cfg.ID).ExitCode)
	waitStdout(t, cfg, "cwd="+wd+" oom=737 comm=sh")
}

func TestDriver_WorkDirMissingFailsTheTask(t *testing.T) {
	td := newTestDriver(t, "")
	cfg := newTask(t, td, "client1", &TaskConfig{Command: "/bin/true", WorkDir: "/no/such/dir"})
	_, _, err := td.StartTask(cfg)
	must.NoError(t, err)
	must.Eq(t, 127, td.waitExit(t, cfg.ID).ExitCode)
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		b, _ := os.ReadFile(filepath.Join(cfg.TaskDir().LogDir, cfg.Name+".stderr.0"))
		return strings.Contains(string(b), "caravan task-exec: work_dir:")
	}), wait.Timeout(10*time.Second), wait.Gap(50*time.Millisecond)))
}

func TestDriver_CgroupOverridesAreRefusedByName(t *testing.T) {
	td := newTestDriver(t, "")
	for _, tc := range []*TaskConfig{
		{Command: "/bin/true", OverrideCgroupV2: "custom.slice/x.scope"},
		{Command: "/bin/true", OverrideCgroupV1: map[string]string{"pids": "custom"}},
	} {
		cfg := newTask(t, td, "client1", tc)
		_, _, err := td.StartTask(cfg)
		// The error crosses the plugin's gRPC boundary as text.
		must.ErrorContains(t, err, "not supported by the caravan driver")
		must.StrContains(t, err.Error(), "cgroup_v")
	}
}

// A task is contained: it and every process it starts are in a cgroup of
// their own (not the agent's), and stopping the task stops them all.
func TestDriver_TaskIsContainedInACgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the executor creates the task's cgroup")
	}
	td := newTestDriver(t, "")
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	cfg := newTask(t, td, "client1", &TaskConfig{Command: "/bin/sh", Args: []string{"-c",
		"sleep 300 & echo $! > " + pidFile + "; wait"}})
	h, _, err := td.StartTask(cfg)
	must.NoError(t, err)
	var st TaskState
	must.NoError(t, h.GetDriverState(&st))
	var child string
	must.Wait(t, wait.InitialSuccess(wait.ErrorFunc(func() error {
		b, err := os.ReadFile(pidFile)
		child = strings.TrimSpace(string(b))
		if err != nil || child == "" {
			return os.ErrNotExist
		}
		return nil
	}), wait.Timeout(20*time.Second), wait.Gap(50*time.Millisecond)))
	self := taskCgroup(t, "self")
	task := taskCgroup(t, strconv.Itoa(st.Pid))
	must.NotEq(t, self, task, must.Sprint("the task shares the test's cgroup"))
	must.Eq(t, task, taskCgroup(t, child), must.Sprint("the task's child is outside its cgroup"))

	must.NoError(t, td.StopTask(cfg.ID, 5*time.Second, "SIGTERM"))
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		_, err := os.Stat("/proc/" + child)
		return os.IsNotExist(err)
	}), wait.Timeout(20*time.Second), wait.Gap(50*time.Millisecond)))
}

// taskCgroup is the cgroup that contains a process: its freezer cgroup on
// cgroups v1 (the one Nomad's v1.6 executor creates), its unified one on v2.
func taskCgroup(t *testing.T, pid string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	must.NoError(t, err)
	unified := ""
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "freezer" {
			return parts[2]
		}
		if parts[0] == "0" {
			unified = parts[2]
		}
	}
	return unified
}
