package trainer

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/driver/protocol"
	"github.com/caravan-nomad/caravan/progress"
)

const envSubprocess = "CARAVAN_TRAINER_TEST_SUBPROCESS"

// TestMain lets the test binary act as `caravan trainer` in a subprocess, so
// real signals and kill -9 can be tested.
func TestMain(m *testing.M) {
	if args := os.Getenv(envSubprocess); args != "" {
		os.Exit(Main(strings.Fields(args)))
	}
	os.Exit(m.Run())
}

var finalRe = regexp.MustCompile(`(final|interrupted) step=(\d+) (?:.* )?params_sha256=([0-9a-f]{64})`)

func finalHash(t *testing.T, out string) (string, string) {
	t.Helper()
	m := finalRe.FindStringSubmatch(out)
	must.SliceLen(t, 4, m, must.Sprintf("no final line in %q", out))
	return m[1], m[3]
}

type subprocess struct {
	cmd *exec.Cmd
	out *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startTrainer(t *testing.T, dir, args string) *subprocess {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), envSubprocess+"="+args, protocol.EnvDir+"="+dir)
	must.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &subprocess{cmd: cmd, out: out}
}

func (s *subprocess) waitOutput(t *testing.T, substr string) {
	t.Helper()
	must.Wait(t, wait.InitialSuccess(
		wait.BoolFunc(func() bool { return strings.Contains(s.out.String(), substr) }),
		wait.Timeout(30*time.Second), wait.Gap(5*time.Millisecond),
	), must.Sprintf("waiting for %q in %q", substr, s.out.String()))
}

func waitSequence(t *testing.T, dir string, seq uint64) {
	t.Helper()
	must.Wait(t, wait.InitialSuccess(
		wait.ErrorFunc(func() error {
			m, err := protocol.ReadMarker(dir)
			if err != nil {
				return err
			}
			if m.Sequence < seq {
				return fmt.Errorf("sequence %d, want %d", m.Sequence, seq)
			}
			return nil
		}),
		wait.Timeout(30*time.Second), wait.Gap(5*time.Millisecond),
	))
}

func TestMain_SignalsKillAndResumeAreBitForBit(t *testing.T) {
	args := "-samples 512 -steps 400 -log-every 0 -step-delay 2ms"
	ref := startTrainer(t, t.TempDir(), "-samples 512 -steps 400 -log-every 0")
	must.NoError(t, ref.cmd.Wait())
	_, want := finalHash(t, ref.out.String())

	dir := t.TempDir()

	// 1: checkpoint on SIGUSR1, then kill -9 (the state after the marker
	// is what a resumed run starts from).
	p := startTrainer(t, dir, args)
	p.waitOutput(t, "training ")
	must.NoError(t, p.cmd.Process.Signal(syscall.SIGUSR1))
	waitSequence(t, dir, 1)
	must.NoError(t, p.cmd.Process.Kill())
	_ = p.cmd.Wait()

	// 2: resume, checkpoint again, then SIGTERM (not the checkpoint
	// signal): exits 143 without another checkpoint.
	p = startTrainer(t, dir, args)
	p.waitOutput(t, "resumed step=")
	must.NoError(t, p.cmd.Process.Signal(syscall.SIGUSR1))
	waitSequence(t, dir, 2)
	must.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	err := p.cmd.Wait()
	var exitErr *exec.ExitError
	must.True(t, errors.As(err, &exitErr))
	must.Eq(t, 143, exitErr.ExitCode())
	m, err := protocol.ReadMarker(dir)
	must.NoError(t, err)
	must.Eq(t, uint64(2), m.Sequence)

	// 3: SIGTERM-style checkpointing: SIGTERM checkpoints and exits.
	p = startTrainer(t, dir, args+" -checkpoint-signal SIGTERM")
	p.waitOutput(t, "resumed step=")
	must.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	_ = p.cmd.Wait()
	m, err = protocol.ReadMarker(dir)
	must.NoError(t, err)
	must.Eq(t, uint64(3), m.Sequence)

	// 4: run to the end.
	p = startTrainer(t, dir, args)
	must.NoError(t, p.cmd.Wait())
	state, got := finalHash(t, p.out.String())
	must.Eq(t, "final", state)
	must.Eq(t, want, got)
}

func TestMain_BadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-steps", "0"}, "steps must be positive"},
		{[]string{"-checkpoint-signal", "SIGFOO"}, "checkpoint-signal"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-gpu-use-percent", "150"}, "gpu-use-percent 150"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tc.args, func(string) string { return "" }, &out, &errOut)
			must.Eq(t, 2, code)
			must.StrContains(t, errOut.String(), tc.want)
		})
	}
}

func TestHTTPReporter_PostsProgress(t *testing.T) {
	for _, envName := range []string{progress.EnvURL, progress.EnvURLDeprecated} {
		t.Run(envName, func(t *testing.T) {
			var mu sync.Mutex
			var got []progress.Sample
			secrets := t.TempDir()
			must.NoError(t, os.WriteFile(filepath.Join(secrets, "nomad_planner.jwt"), []byte("tok123\n"), 0o600))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer tok123" {
					http.Error(w, "no token", http.StatusUnauthorized)
					return
				}
				must.Eq(t, progress.Path, r.URL.Path)
				s, err := progress.Decode(r.Body)
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				mu.Lock()
				got = append(got, s)
				mu.Unlock()
			}))
			defer srv.Close()

			var out bytes.Buffer
			env := map[string]string{envName: srv.URL, "NOMAD_SECRETS_DIR": secrets}
			code := run([]string{"-samples", "256", "-steps", "100", "-log-every", "50"}, func(k string) string { return env[k] }, &out, &out)
			must.Eq(t, 0, code, must.Sprint(out.String()))
			must.StrNotContains(t, out.String(), "progress report failed")
			mu.Lock()
			defer mu.Unlock()
			must.SliceNotEmpty(t, got)
			last := got[len(got)-1]
			must.Eq(t, int64(100), last.Step)
			must.True(t, last.Done)
			must.Eq(t, int64(100), last.StepsTotal)
			must.Positive(t, last.SamplesPerSec)
		})
	}
}

// lockedBuffer is a bytes.Buffer safe for the training loop and the
// reporter goroutine (which prints report failures) to write at once, as
// os.Stdout is.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestHTTPReporter_UnreachablePlannerIsLoggedOnce(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens there any more
	var out lockedBuffer
	env := map[string]string{progress.EnvURL: srv.URL, progress.EnvToken: "tok"}
	code := run([]string{"-samples", "256", "-steps", "100", "-log-every", "10"}, func(k string) string { return env[k] }, &out, &out)
	must.Eq(t, 0, code, must.Sprint(out.String()))
	must.Eq(t, 1, strings.Count(out.String(), "progress report failed"), must.Sprint(out.String()))
}

func TestMain_HoldKeepsRunningAndCheckpointsTheFinalState(t *testing.T) {
	dir := t.TempDir()
	p := startTrainer(t, dir, "-samples 256 -steps 50 -log-every 0 -hold")
	p.waitOutput(t, "holding:")
	must.NoError(t, p.cmd.Process.Signal(syscall.SIGUSR1))
	waitSequence(t, dir, 1)
	m, err := protocol.ReadMarker(dir)
	must.NoError(t, err)
	must.Eq(t, uint64(50), *m.Step)
	must.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	must.NoError(t, p.cmd.Wait()) // exit 0: the training had finished

	// Resuming a finished run holds again at once with the same parameters.
	_, first := finalHash(t, p.out.String())
	p = startTrainer(t, dir, "-samples 256 -steps 50 -log-every 0 -hold")
	p.waitOutput(t, "holding:")
	_, again := finalHash(t, p.out.String())
	must.Eq(t, first, again)
	must.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	must.NoError(t, p.cmd.Wait())
}
