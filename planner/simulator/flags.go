package simulator

import (
	"flag"
	"slices"
	"strings"

	"github.com/caravan-nomad/caravan/internal/cli"
	"github.com/caravan-nomad/caravan/planner/policy"
)

// checkFlags rejects every flag value the simulator would otherwise use
// silently, naming the flag.
func checkFlags(fs *flag.FlagSet, pol, policies string, nodes, gpus, workers, generate, start, hours int, interval, interference float64) error {
	c := cli.For(fs)
	c.NoArgs()
	policyList(c, "policy", pol)
	policyList(c, "policies", policies)
	if c.Set("nodes") {
		c.AtLeast("nodes", nodes, 1)
	}
	c.AtLeast("gpus", gpus, 1)
	c.AtLeast("workers", workers, 1)
	c.AtLeast("generate", generate, 0)
	c.Between("start", start, 0, 23)
	c.Between("hours", hours, 1, 24)
	c.Positive("interval", interval)
	c.Fraction("interference", interference, 0, 1)
	return c.Err()
}

// policyList checks a comma-separated list of policy names.
func policyList(c *cli.Checks, name, list string) {
	for _, p := range strings.Split(list, ",") {
		if !slices.Contains(policy.Names(), p) {
			c.Fail(name, "unknown policy %q (want a comma-separated list of %s)", p, strings.Join(policy.Names(), ", "))
		}
	}
}
