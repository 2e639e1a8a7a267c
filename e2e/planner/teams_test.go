package planner

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
	"github.com/caravan-nomad/caravan/trainer"
)

// logEvery1 makes a train-elastic coordinator log every step, so a test
// sees the first one at once.
const logEvery1 = `trainer_args=["-log-every","1"]`

// waitLeading waits until the planner leads and has synced with Nomad.
func (p *instance) waitLeading(t *testing.T) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, func() error {
		h, err := p.health()
		if err != nil {
			return err
		}
		if !h.Leader || !h.Synced {
			return fmt.Errorf("planner %s not leading yet: %+v", p.name, h)
		}
		return nil
	})
}

// teamNamespaces creates the two team namespaces of the queue tests
// (queuesConfig: a 2-GPU guarantee each).
func teamNamespaces(t *testing.T, c *harness.C) {
	t.Helper()
	for _, ns := range []string{"team-a", "team-b"} {
		_, err := c.CLI(t, "namespace", "apply", "-description", "caravan e2e team queue", ns)
		must.NoError(t, err)
	}
}

// plainStartTime submits a 2-worker team-a job on the idle cluster and
// returns the time from its submit to its first step (the baseline a
// reclaim is measured against in the same run), then purges it.
func plainStartTime(t *testing.T, c *harness.C, id string) time.Duration {
	t.Helper()
	plain := submitElastic(t, c, "team-a", id, 100, 2, 2, logEvery1)
	t0 := time.Now()
	_, seen := plain.waitLog(plain.coordinator(time.Minute), firstStepRe, time.Minute)
	plain.purge()
	return seen.Sub(t0)
}

// referenceHash runs one uninterrupted trainer of steps in the background
// and sends its final parameters' hash (or the run's error).
func referenceHash(steps uint64) <-chan string {
	want := make(chan string, 1)
	go func() {
		cfg := trainer.DefaultConfig()
		cfg.Steps, cfg.LogEvery = steps, 0
		res, err := trainer.Run(context.Background(), cfg, trainer.Options{})
		if err != nil {
			want <- err.Error()
			return
		}
		want <- res.Hash
	}()
	return want
}
