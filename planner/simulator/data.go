package simulator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/caravan-nomad/caravan/planner/workload"
)

// DataEnv names the environment variable that points at the Pollux data
// directory (workloads/, traces/, published-avg-jct.csv, philly-jobs.csv).
const DataEnv = "CARAVAN_POLLUX_DATA"

// FindData returns the data directory: flag value, then $CARAVAN_POLLUX_DATA,
// then ../shared/data/pollux and /work/shared/data/pollux.
func FindData(flag string) (string, error) {
	for _, d := range []string{flag, os.Getenv(DataEnv), filepath.Join("..", "shared", "data", "pollux"), "/work/shared/data/pollux"} {
		if d == "" {
			continue
		}
		if st, err := os.Stat(filepath.Join(d, "traces")); err == nil && st.IsDir() {
			return d, nil
		}
		if d == flag {
			return "", fmt.Errorf("data directory %s has no traces/ folder", d)
		}
	}
	return "", errors.New("no Pollux data directory found: pass --data or set " + DataEnv)
}

// LoadApplications reads every model trace under dir/traces.
func LoadApplications(dir string) (map[string]*Application, error) {
	traces, err := workload.ReadTraces(filepath.Join(dir, "traces"))
	if err != nil {
		return nil, err
	}
	apps := map[string]*Application{}
	for name, tr := range traces {
		a, err := newApplication(tr)
		if err != nil {
			return nil, err
		}
		apps[name] = a
	}
	return apps, nil
}

// Known lists the application names for workload validation.
func Known(apps map[string]*Application) map[string]bool {
	k := map[string]bool{}
	for n := range apps {
		k[n] = true
	}
	return k
}
