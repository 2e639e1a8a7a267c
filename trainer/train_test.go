package trainer

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/protocol"
)

func testConfig() Config {
	c := DefaultConfig()
	c.Samples, c.Steps, c.LogEvery = 512, 600, 0
	return c
}

func uninterrupted(t *testing.T, c Config) *Result {
	t.Helper()
	res, err := Run(context.Background(), c, Options{})
	must.NoError(t, err)
	must.False(t, res.Interrupted)
	must.Eq(t, c.Steps, res.Step)
	return res
}

// copyDir stands in for the checkpoint store carrying a directory to another node.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	must.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		must.NoError(t, err)
		must.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
	return dst
}

// runUntil runs c in dir and asks for a checkpoint-and-exit after `at` steps.
func runUntil(t *testing.T, c Config, dir string, at uint64, extra map[uint64]Request) *Result {
	t.Helper()
	reqs := make(chan Request, 2)
	res, err := Run(context.Background(), c, Options{
		Dir: dir, Requests: reqs,
		AfterStep: func(step uint64) {
			if r, ok := extra[step]; ok {
				reqs <- r
			}
			if step == at {
				reqs <- RequestCheckpointAndExit
			}
		},
	})
	must.NoError(t, err)
	return res
}

func TestRun_LearnsSomething(t *testing.T) {
	c := testConfig()
	before, _ := NewModel(c).Loss(NewDataset(c))
	res := uninterrupted(t, c)
	must.Less(t, before, res.Loss)
	must.Greater(t, 0.8, res.Accuracy)
}

func TestRun_SuspendResumeMigrateIsBitForBit(t *testing.T) {
	c := testConfig()
	want := uninterrupted(t, c)

	cases := []struct {
		name  string
		stops []uint64
	}{
		{"once", []uint64{1}},
		{"twice", []uint64{150, 151}},
		{"three times with migrations", []uint64{100, 333, 599}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var last *Result
			for i, at := range tc.stops {
				// A periodic checkpoint in between must not disturb the result.
				res := runUntil(t, c, dir, at, map[uint64]Request{at - 1: RequestCheckpoint})
				must.True(t, res.Interrupted)
				must.Eq(t, at, res.Step)
				if i%2 == 1 {
					dir = copyDir(t, dir) // "migrate" to another node
				}
				last = res
			}
			must.NotNil(t, last)
			res, err := Run(context.Background(), c, Options{Dir: dir})
			must.NoError(t, err)
			must.Eq(t, tc.stops[len(tc.stops)-1], res.StartStep)
			must.Eq(t, want.Hash, res.Hash)
		})
	}
}

func TestRun_SequenceKeepsIncreasing(t *testing.T) {
	c := testConfig()
	dir := t.TempDir()
	runUntil(t, c, dir, 10, map[uint64]Request{5: RequestCheckpoint})
	m, err := protocol.ReadMarker(dir)
	must.NoError(t, err)
	must.Eq(t, uint64(2), m.Sequence)
	must.Eq(t, uint64(10), *m.Step)

	// The driver's env floor wins over an older marker.
	reqs := make(chan Request, 1)
	reqs <- RequestCheckpointAndExit
	_, err = Run(context.Background(), c, Options{Dir: dir, MinSequence: 41, Requests: reqs})
	must.NoError(t, err)
	m, err = protocol.ReadMarker(dir)
	must.NoError(t, err)
	must.Eq(t, uint64(42), m.Sequence)
}

func TestRun_RefusesUnusableCheckpoints(t *testing.T) {
	c := testConfig()
	cases := []struct {
		name   string
		break_ func(t *testing.T, dir string)
		cfg    func(c Config) Config
	}{
		{"other configuration", func(*testing.T, string) {}, func(c Config) Config { c.LR = 0.2; return c }},
		{"corrupt state", func(t *testing.T, dir string) {
			p := filepath.Join(dir, StateFile)
			b, err := os.ReadFile(p)
			must.NoError(t, err)
			b[100] ^= 1
			must.NoError(t, os.WriteFile(p, b, 0o644))
		}, nil},
		{"marker without state", func(t *testing.T, dir string) {
			must.NoError(t, os.Remove(filepath.Join(dir, StateFile)))
		}, nil},
		{"truncated state", func(t *testing.T, dir string) {
			must.NoError(t, os.Truncate(filepath.Join(dir, StateFile), 20))
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			runUntil(t, c, dir, 20, nil)
			tc.break_(t, dir)
			c2 := c
			if tc.cfg != nil {
				c2 = tc.cfg(c)
			}
			_, err := Run(context.Background(), c2, Options{Dir: dir})
			must.Error(t, err)
		})
	}
}

func TestConfig_Validate(t *testing.T) {
	cases := []struct {
		name string
		mut  func(*Config)
	}{
		{"samples", func(c *Config) { c.Samples = 0 }},
		{"batch", func(c *Config) { c.Batch = -1 }},
		{"steps", func(c *Config) { c.Steps = 0 }},
		{"lr", func(c *Config) { c.LR = 0 }},
		{"momentum", func(c *Config) { c.Momentum = 1 }},
		{"label-noise", func(c *Config) { c.LabelNoise = 0.5 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mut(&c)
			err := c.Validate()
			must.ErrorContains(t, err, tc.name)
		})
	}
}
