package packsim

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"

	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/caravan-nomad/caravan/planner/simulator/pollux"
	"github.com/caravan-nomad/caravan/planner/workload"
)

// PhillySpecs reads philly-jobs.csv: each job's workers are its GPUs and
// its work its recorded duration; its profile is drawn from mix (SYNTHETIC).
func PhillySpecs(path string, mix Mix, seed uint64, shares int) ([]Spec, error) {
	rows, err := workload.ReadPhilly(path)
	if err != nil {
		return nil, err
	}
	base := rows[0].Submit
	specs := make([]Spec, len(rows))
	for i, r := range rows {
		specs[i] = Spec{ID: fmt.Sprintf("philly-%05d", i), Kind: "philly", Submit: r.Submit.Sub(base).Seconds(),
			Workers: r.GPUs, Work: math.Max(r.Duration, 1), Profile: mix.Draw(seed, i, shares)}
	}
	return specs, nil
}

// PolluxWorkload is one workload of the Pollux artifact as packing specs.
type PolluxWorkload struct {
	Name  string
	Specs []Spec
}

// PolluxSpecs reads every workload under dir/workloads. A job's workers are
// its num_replicas and its work its run time alone at that size on the
// artifact's cluster (16 nodes x 4 GPUs), at its batch size, from the
// Pollux engine's measured traces (the fifo policy, the job alone, less
// the engine's first-start penalty). Profiles are drawn from mix
// (SYNTHETIC), job i of every workload with the same draw.
func PolluxSpecs(dir string, mix Mix, seed uint64, shares int) ([]PolluxWorkload, error) {
	apps, err := pollux.LoadApplications(dir)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "workloads", "*.csv"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	cache := map[string]float64{}
	var out []PolluxWorkload
	for _, f := range files {
		jobs, err := workload.ReadJobs(f, pollux.Known(apps))
		if err != nil {
			return nil, err
		}
		w := PolluxWorkload{Name: strings.TrimSuffix(filepath.Base(f), ".csv")}
		for i, wj := range jobs {
			work, err := soloWork(wj, apps, cache)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", f, wj.Name, err)
			}
			w.Specs = append(w.Specs, Spec{ID: wj.Name, Kind: wj.Application, Submit: wj.Time, Workers: wj.Replicas,
				Work: work, Profile: mix.Draw(seed, i, shares)})
		}
		out = append(out, w)
	}
	return out, nil
}

// soloWork is the job's run time alone at its size (cached by application,
// replicas and batch).
func soloWork(wj workload.Job, apps map[string]*pollux.Application, cache map[string]float64) (float64, error) {
	key := fmt.Sprintf("%s/%d/%d", wj.Application, wj.Replicas, wj.BatchSize)
	if w, ok := cache[key]; ok {
		return w, nil
	}
	alone := wj
	alone.Time = 0
	res, err := pollux.Simulate(engine.Config{Nodes: 16, GPUsPerNode: 4}, "fifo", []workload.Job{alone}, apps)
	if err != nil {
		return 0, err
	}
	w := math.Max(res.Jobs[0].JCT-engine.RestartPenalty, 1)
	cache[key] = w
	return w, nil
}
