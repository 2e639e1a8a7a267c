package store

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
)

// The test binary doubles as a helper process: with CARAVAN_STORE_HELPER set
// it runs one store operation instead of the tests, optionally killing itself
// with SIGKILL at the Nth occurrence of a named step (see hooks.go).
const (
	envHelper  = "CARAVAN_STORE_HELPER" // commit | restore | commit-loop
	envRoot    = "CARAVAN_STORE_ROOT"
	envDir     = "CARAVAN_STORE_DIR" // commit source or restore destination
	envJob     = "CARAVAN_STORE_JOB"
	envCrashAt = "CARAVAN_STORE_CRASH_AT"
	envCrashN  = "CARAVAN_STORE_CRASH_N"
	envLoops   = "CARAVAN_STORE_LOOPS"
	envChunk   = "CARAVAN_STORE_CHUNK"
	envPauseAt = "CARAVAN_STORE_PAUSE_AT" // print "paused" at this step, resume when stdin closes
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envHelper); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

func runHelper(mode string) int {
	if step := os.Getenv(envCrashAt); step != "" {
		n, _ := strconv.Atoi(os.Getenv(envCrashN))
		seen := 0
		testHook = func(s string) {
			if s != step {
				return
			}
			if seen++; seen >= n {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // never returns
			}
		}
	}
	if step := os.Getenv(envPauseAt); step != "" {
		testHook = func(s string) {
			if s == step {
				fmt.Println("paused")
				_, _ = io.Copy(io.Discard, os.Stdin)
			}
		}
	}
	chunk, _ := strconv.Atoi(os.Getenv(envChunk))
	s, err := Open(os.Getenv(envRoot), Options{ChunkSize: chunk, Retain: 100,
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr})})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	key := testKey(os.Getenv(envJob))
	ctx := context.Background()
	switch mode {
	case "commit":
		_, _, err = s.Commit(ctx, key, os.Getenv(envDir), "helper", nil)
	case "commit-loop":
		loops, _ := strconv.Atoi(os.Getenv(envLoops))
		for i := 0; i < loops && err == nil; i++ {
			_, _, err = s.Commit(ctx, key, os.Getenv(envDir), "helper-"+strconv.Itoa(os.Getpid()), nil)
		}
	case "restore":
		_, err = s.Restore(ctx, key, os.Getenv(envDir))
	default:
		err = fmt.Errorf("unknown helper mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// helperCmd returns a command re-executing the test binary in helper mode.
func helperCmd(t *testing.T, mode, root, dir, job string, extra ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		envHelper+"="+mode, envRoot+"="+root, envDir+"="+dir, envJob+"="+job,
		envChunk+"="+strconv.Itoa(testChunkSize))
	cmd.Env = append(cmd.Env, extra...)
	return cmd
}

// killedBySIGKILL reports whether the helper died by SIGKILL.
func killedBySIGKILL(err error) bool {
	ee, ok := err.(*exec.ExitError)
	if !ok {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}
