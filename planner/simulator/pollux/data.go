package pollux

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

// FindData returns the data directory: the flag value, else
// $CARAVAN_POLLUX_DATA, else shared/data/pollux found beside the working
// directory, the running binary, or one of their parents (a checkout next
// to the shared data, as in the project's layout). There is no fixed
// absolute fallback.
func FindData(flag string) (string, error) {
	if flag != "" {
		return flag, checkData(flag)
	}
	if env := os.Getenv(DataEnv); env != "" {
		if err := checkData(env); err != nil {
			return "", fmt.Errorf("$%s: %w", DataEnv, err)
		}
		return env, nil
	}
	starts := []string{}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, start := range starts {
		for d, i := start, 0; i < 6; d, i = filepath.Dir(d), i+1 {
			cand := filepath.Join(d, "shared", "data", "pollux")
			if checkData(cand) == nil {
				return cand, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", errors.New("no Pollux data directory found: pass --data <dir> or set " + DataEnv +
		" (a directory with traces/, workloads/ and philly-jobs.csv)")
}

func checkData(dir string) error {
	st, err := os.Stat(filepath.Join(dir, "traces"))
	if err != nil || !st.IsDir() {
		return fmt.Errorf("data directory %s has no traces/ folder", dir)
	}
	return nil
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
