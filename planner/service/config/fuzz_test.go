package config

import (
	"math"
	"testing"
	"time"

	"github.com/caravan-nomad/caravan/planner/queue"
)

// FuzzParse feeds arbitrary HCL to the planner's config parser: it must
// never panic, and whatever Parse and Validate both accept must be sane
// (finite, positive where it must be, within the documented bounds).
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		``,
		`log_level = "debug"
port = 9000
nomad { address = "http://127.0.0.1:4646" blocking_wait = "30s" }`,
		"consul {\n  lock_key = \"x/leader\"\n  session_ttl = \"15s\"\n}\n",
		"policy {\n  name = \"goodput\"\n  interval = \"10s\"\n  max_changes_per_round = 2\n  min_gain = 0.5\n}\n",
		"capacity {\n  device = \"caravan/gpu\"\n  shares_per_gpu = 4\n}\nprogress {\n  max_samples = 100\n}\n",
		"policy {\n  min_gain = 1e400\n}\n",
		"progress {\n  max_samples = 1e18\n}\n",
		"capacity {\n  gpus_per_node = 9223372036854775807\n  shares_per_gpu = -1\n}\n",
		"policy {\n  interval = \"-1s\"\n  cooldown = \"2562047h\"\n}\n",
		"nomad {\n  nomad {\n}\n}\n", `port = "x"`, `}{`,
		"queue \"a\" {\n  namespaces = [\"x\"]\n  guarantee = 2\n  borrowing_limit = \"0.5\"\n  weight = 2\n}\n",
		"queue \"a\" {\n  namespaces = [\"x\"]\n}\nqueue \"b\" {\n  namespaces = [\"x\"]\n  guarantee = -1\n}\n",
		"queues {\n  default = \"a\"\n  reclaim = false\n}\nqueue \"a\" {\n  namespaces = [\"*\"]\n  lending_limit = \"1e400\"\n}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		c := Default()
		if err := Parse(c, "fuzz.hcl", src); err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			return
		}
		p := c.Policy
		if math.IsNaN(p.MinGain) || math.IsInf(p.MinGain, 0) || p.MinGain < 0 || p.MinGain > MaxMinGain {
			t.Fatalf("accepted min_gain %v", p.MinGain)
		}
		for name, d := range map[string]time.Duration{"interval": p.Interval, "cooldown": p.Cooldown,
			"restart_cost": p.RestartCost, "suspend_quantum": p.SuspendQuantum, "blocking_wait": c.Nomad.BlockingWait} {
			if d < 0 || d > MaxDuration {
				t.Fatalf("accepted %s %s", name, d)
			}
		}
		if c.Progress.MaxSamples > MaxSamples || c.Capacity.SharesPerGPU > MaxSharesPerGPU ||
			c.Capacity.GPUsPerNode > MaxGPUsPerNode || p.MaxChangesPerRound > MaxChangesPerRound {
			t.Fatalf("accepted an absurd count: %+v %+v %+v", c.Progress, c.Capacity, p)
		}
		for _, q := range c.Queues.Queues {
			if q.Guarantee < 0 || q.BorrowLimit < queue.Unlimited || q.LendLimit < queue.Unlimited || len(q.Namespaces) == 0 ||
				math.IsNaN(q.Weight) || q.Weight <= 0 {
				t.Fatalf("accepted queue %+v", q)
			}
		}
	})
}
