package simulator

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// resolveWorkload finds the --workload file: as given, else (a relative
// path) inside the Pollux data directory, so that the shared workloads are
// named as `workloads/workload-1.csv` from anywhere. A missing file's error
// names the flag and where it was looked for.
func resolveWorkload(path, dataDir string) (string, error) {
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("--workload %s: %w", path, err)
	}
	if !filepath.IsAbs(path) && dataDir != "" {
		in := filepath.Join(dataDir, path)
		if _, err := os.Stat(in); err == nil {
			return in, nil
		}
		return "", fmt.Errorf("--workload %s: no such file in the working directory or in the data directory %s", path, dataDir)
	}
	return "", fmt.Errorf("--workload %s: no such file", path)
}
