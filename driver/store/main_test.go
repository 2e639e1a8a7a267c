package store

import (
	"context"
	"errors"
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
	envNofile  = "CARAVAN_STORE_NOFILE"   // RLIMIT_NOFILE of the helper
	envFsize   = "CARAVAN_STORE_FSIZE"    // RLIMIT_FSIZE of the helper, in bytes
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envHelper); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

func runHelper(mode string) int {
	if err := setLimits(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
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
		var res *RestoreResult
		res, err = s.Restore(ctx, key, os.Getenv(envDir))
		if err == nil {
			fmt.Printf("restored generation %d fell_back %v in %s\n", res.Manifest.Generation, res.FellBack, res.Duration)
		} else {
			fmt.Printf("restore error: corrupt=%v dest=%v no_checkpoint=%v emfile=%v\n", errors.Is(err, ErrCorrupt),
				errors.Is(err, ErrRestoreDest), errors.Is(err, ErrNoCheckpoint), errors.Is(err, syscall.EMFILE))
		}
	default:
		err = fmt.Errorf("unknown helper mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	printPeakRSS()
	return 0
}

// setLimits lowers the helper's resource limits as envNofile and envFsize
// ask.
func setLimits() error {
	for _, l := range []struct {
		env      string
		resource int
	}{{envNofile, syscall.RLIMIT_NOFILE}, {envFsize, syscall.RLIMIT_FSIZE}} {
		v := os.Getenv(l.env)
		if v == "" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", l.env, err)
		}
		if err := syscall.Setrlimit(l.resource, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
			return fmt.Errorf("%s: setrlimit: %w", l.env, err)
		}
	}
	return nil
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
