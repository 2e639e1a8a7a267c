package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/progress"
)

func TestParseLine(t *testing.T) {
	cases := []struct {
		line      string
		ok, ckpt  bool
		step      int64
		loss, sps float64
		done      bool
	}{
		{"step=100 loss=0.500000 samples_per_sec=800", true, false, 100, 0.5, 800, false},
		{"final step=2000 loss=0.120000 accuracy=0.97 params_sha256=ab", true, false, 2000, 0.12, 0, true},
		{"checkpoint step=300 sequence=2 duration=1ms", false, true, 300, 0, 0, false},
		{"epoch 3: step=5 loss=nan", false, false, 0, 0, 0, false},
		{"resumed step=300 sequence=2", false, false, 0, 0, 0, false},
		{"training config start_step=0", false, false, 0, 0, 0, false},
		{"", false, false, 0, 0, 0, false},
		{"step=-1 loss=1", false, false, 0, 0, 0, false},
	}
	for _, tc := range cases {
		s, ok, ckpt := ParseLine(tc.line)
		must.Eq(t, tc.ok, ok, must.Sprint(tc.line))
		must.Eq(t, tc.ckpt, ckpt, must.Sprint(tc.line))
		if ok || ckpt {
			must.Eq(t, tc.step, s.Step)
		}
		if ok {
			must.Eq(t, tc.loss, s.Loss)
			must.Eq(t, tc.sps, s.SamplesPerSec)
			must.Eq(t, tc.done, s.Done)
		}
	}
}

// The trainer's log line with gradient statistics; a negative statistic
// makes the sample invalid.
func TestParseLine_GradStats(t *testing.T) {
	s, ok, _ := ParseLine("step=50 loss=0.6 samples_per_sec=900 grad_sqr=0.0125 grad_var=3.5e-05")
	must.True(t, ok)
	must.Eq(t, 0.0125, s.GradSqr)
	must.Eq(t, 3.5e-05, s.GradVar)
	_, ok, _ = ParseLine("step=50 loss=0.6 grad_sqr=-1")
	must.False(t, ok)
}

type collector struct {
	mu      sync.Mutex
	samples []progress.Sample
	tokens  []string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var s progress.Sample
	_ = json.NewDecoder(r.Body).Decode(&s)
	c.mu.Lock()
	c.samples = append(c.samples, s)
	c.tokens = append(c.tokens, r.Header.Get("Authorization"))
	c.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (c *collector) got() []progress.Sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]progress.Sample(nil), c.samples...)
}

func appendLine(t *testing.T, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	must.NoError(t, err)
	_, err = f.WriteString(line)
	must.NoError(t, err)
	must.NoError(t, f.Close())
}

func TestRun_FollowsRotatedLogAndReportsNewest(t *testing.T) {
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	dir := t.TempDir()
	base := filepath.Join(dir, "train.stdout")
	urls := filepath.Join(dir, "planners")
	must.NoError(t, os.WriteFile(urls, []byte(srv.URL+"\n"), 0o644))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{File: base, URLsFile: urls, Every: 20 * time.Millisecond, Poll: 5 * time.Millisecond,
			Token: func() string { return "jwt" }})
	}()
	until := func(f func([]progress.Sample) bool) {
		t.Helper()
		must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool { return f(col.got()) }),
			wait.Timeout(5*time.Second), wait.Gap(5*time.Millisecond)))
	}
	// The log appears late, written in pieces.
	appendLine(t, base+".0", "training start_step=0\nstep=10 loss=0.9")
	appendLine(t, base+".0", "0 samples_per_sec=100\n")
	until(func(s []progress.Sample) bool { return len(s) >= 1 && s[len(s)-1].Step == 10 })
	must.Eq(t, 0.90, col.got()[0].Loss)

	// Nomad rotates the log: the relay moves on to .1.
	appendLine(t, base+".0", "step=20 loss=0.8 samples_per_sec=100\n")
	appendLine(t, base+".1", "checkpoint step=20 sequence=1\nstep=30 loss=0.7 samples_per_sec=100\n")
	until(func(s []progress.Sample) bool { return len(s) >= 1 && s[len(s)-1].Step == 30 })
	appendLine(t, base+".1", "final step=40 loss=0.6 accuracy=0.9\n")
	until(func(s []progress.Sample) bool { return len(s) >= 1 && s[len(s)-1].Done })

	cancel()
	must.ErrorIs(t, <-done, context.Canceled)
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, tok := range col.tokens {
		must.Eq(t, "Bearer jwt", tok)
	}
	var sawCheckpoint bool
	for _, s := range col.samples {
		sawCheckpoint = sawCheckpoint || s.Checkpointed
	}
	must.True(t, sawCheckpoint)
}

func TestMain_RejectsInvalidFlags(t *testing.T) {
	env := func(string) string { return "" }
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-file", "x.log", "-url", "http://127.0.0.1:1", "extra"}, `unexpected argument "extra"`},
		{[]string{"-file", "x.log", "-url", "http://127.0.0.1:1", "-every", "0s"}, "-every: must be greater than 0"},
		{[]string{"-file", "x.log", "-url", "http://127.0.0.1:1", "-every", "-1s"}, "-every: must be greater than 0"},
		{[]string{"-url", "http://127.0.0.1:1"}, "-file is required"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			must.Eq(t, 2, Main(tc.args, env, &stderr))
			must.StrContains(t, stderr.String(), tc.want)
		})
	}
}
