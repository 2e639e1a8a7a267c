package trainer

import (
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/protocol"
)

var (
	checkpointStepRe  = regexp.MustCompile(`checkpoint step=(\d+) `)
	interruptedStepRe = regexp.MustCompile(`interrupted step=(\d+) `)
)

func lineStep(t *testing.T, re *regexp.Regexp, out string) uint64 {
	t.Helper()
	m := re.FindStringSubmatch(out)
	must.SliceLen(t, 2, m, must.Sprintf("no %s in %q", re, out))
	n, err := strconv.ParseUint(m[1], 10, 64)
	must.NoError(t, err)
	return n
}

// TestMain_StopMidStepFinishesTheStep: a stop signal that arrives while a
// step computes (each step here is 128 ms of MODELLED compute) lets the
// step finish, checkpoints at that step boundary (SIGTERM-style
// checkpointing), and the process exits by itself, 128+SIGTERM, not killed
// by the signal: what a packed MPS client must do so it leaves no sticky
// fault behind. A run resumed from that checkpoint ends bit for bit with an
// uninterrupted one.
func TestMain_StopMidStepFinishesTheStep(t *testing.T) {
	dir := t.TempDir()
	p := startTrainer(t, dir, "-samples 512 -steps 1000000 -log-every 1 -compute-per-sample 2ms -checkpoint-signal SIGTERM")
	p.waitOutput(t, "step=2 ")
	must.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	err := p.cmd.Wait()
	var exitErr *exec.ExitError
	must.True(t, errors.As(err, &exitErr), must.Sprint(p.out.String()))
	must.Eq(t, 128+int(syscall.SIGTERM), exitErr.ExitCode())
	ws := exitErr.Sys().(syscall.WaitStatus)
	must.False(t, ws.Signaled(), must.Sprint("the process exits itself, not killed by the signal"))

	out := p.out.String()
	stopped := lineStep(t, interruptedStepRe, out)
	must.Eq(t, stopped, lineStep(t, checkpointStepRe, out), must.Sprint("checkpoint at the step the run stopped at"))
	must.GreaterEq(t, 2, stopped)
	m, err := protocol.ReadMarker(dir)
	must.NoError(t, err)
	must.Eq(t, uint64(1), m.Sequence)

	// Resume to a few steps further; compare with an uninterrupted run.
	steps := stopped + 3
	args := fmt.Sprintf("-samples 512 -steps %d -log-every 0", steps)
	resumed := startTrainer(t, dir, args)
	must.NoError(t, resumed.cmd.Wait())
	ref := startTrainer(t, t.TempDir(), args)
	must.NoError(t, ref.cmd.Wait())
	_, want := finalHash(t, ref.out.String())
	state, got := finalHash(t, resumed.out.String())
	must.Eq(t, "final", state)
	must.Eq(t, want, got)
}
