package pollux

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/caravan-nomad/caravan/planner/workload"
)

// JobConfig is one (replicas, batch) choice a user might make for a model.
type JobConfig struct {
	Replicas  int
	BatchSize int
	JCT       float64 // seconds alone on the cluster
}

// Configurations lists the (replicas, batch size) pairs a sensible user
// would pick, as the Pollux artifact's workload generator does: for each
// replica count (packed four per node), the validated batch size with the
// shortest run alone, kept when it runs under 12 hours and its scaling
// efficiency against one GPU is between lo and hi; one GPU if none is.
func (a *Application) Configurations(lo, hi float64) []JobConfig {
	var out []JobConfig
	var base JobConfig
	for _, r := range []int{1, 2, 4, 6, 8, 12, 16, 24, 32, 48} {
		if float64(r)*a.MinLocalBsz > a.MaxBatch {
			break
		}
		var pl []int
		for left := r; left > 0; left -= 4 {
			pl = append(pl, min(left, 4))
		}
		best := JobConfig{Replicas: r, JCT: math.Inf(1)}
		for _, b := range a.batches {
			local := math.Ceil(float64(b)/float64(r) - 1e-8)
			if local < a.MinLocalBsz {
				continue
			}
			accum := max(int(math.Ceil(local/a.MaxLocalBsz-1e-8))-1, 0)
			atomic := math.Ceil(local/float64(accum+1) - 1e-8)
			st, sy := a.Throughput(pl, atomic)
			step := st + float64(accum)*(st-sy)
			jct := a.val[b][a.CompletionEpoch()].Iteration * step
			if jct < best.JCT {
				best.JCT, best.BatchSize = jct, b
			}
		}
		if r == 1 {
			base = best
			continue
		}
		if eff := base.JCT / best.JCT / float64(r); best.JCT < 12*3600 && lo < eff && eff < hi {
			out = append(out, best)
		}
	}
	if len(out) == 0 {
		out = append(out, base)
	}
	return out
}

// Generate samples a workload from the Philly trace the way the Pollux
// artifact built its workloads: jobs submitted in an hours-long window of
// the day starting at startHour, each mapped to a model by its GPU time
// (under 1 GPU-hour cifar10 or ncf, under 10 deepspeech2 or bert, under 100
// yolov3, else imagenet) with a (replicas, batch) a user would choose.
// Deterministic for a seed; not byte-identical to the artifact's Python.
func Generate(trace []workload.PhillyJob, apps map[string]*Application, n, startHour, hours int, seed uint64) ([]workload.Job, error) {
	for _, name := range []string{"cifar10", "ncf", "deepspeech2", "bert", "yolov3", "imagenet"} {
		if apps[name] == nil {
			return nil, fmt.Errorf("generate: no trace for %s", name)
		}
	}
	type cand struct {
		at      float64
		gpuTime float64
	}
	var pool []cand
	for _, j := range trace {
		gt := j.Duration * float64(j.GPUs)
		if j.Duration < 60 || gt >= 1000*3600 {
			continue
		}
		t := j.Submit.Add(-time.Duration(startHour) * time.Hour)
		if t.Hour() >= hours {
			continue
		}
		pool = append(pool, cand{at: float64(t.Hour()*3600 + t.Minute()*60 + t.Second()), gpuTime: gt})
	}
	if len(pool) < n {
		return nil, fmt.Errorf("generate: only %d trace jobs in the window, want %d", len(pool), n)
	}
	r := rand.New(rand.NewPCG(seed, seed+3))
	r.Shuffle(len(pool), func(a, b int) { pool[a], pool[b] = pool[b], pool[a] })
	pool = pool[:n]
	sort.SliceStable(pool, func(a, b int) bool { return pool[a].at < pool[b].at })
	jobs := make([]workload.Job, 0, n)
	for i, c := range pool {
		var app string
		switch {
		case c.gpuTime < 3600:
			app = []string{"cifar10", "ncf"}[r.IntN(2)]
		case c.gpuTime < 10*3600:
			app = []string{"deepspeech2", "bert"}[r.IntN(2)]
		case c.gpuTime < 100*3600:
			app = "yolov3"
		default:
			app = "imagenet"
		}
		cfgs := apps[app].Configurations(0.5, 0.8)
		cfg := cfgs[r.IntN(len(cfgs))]
		jobs = append(jobs, workload.Job{Name: fmt.Sprintf("%s-%d", app, i), Time: c.at, Application: app,
			Replicas: cfg.Replicas, BatchSize: cfg.BatchSize})
	}
	return jobs, nil
}

// WriteJobs writes a workload CSV.
func WriteJobs(w io.Writer, jobs []workload.Job) error {
	if _, err := fmt.Fprintln(w, "name,time,application,num_replicas,batch_size"); err != nil {
		return err
	}
	for _, j := range jobs {
		if _, err := fmt.Fprintf(w, "%s,%.0f,%s,%d,%d\n", j.Name, j.Time, j.Application, j.Replicas, j.BatchSize); err != nil {
			return err
		}
	}
	return nil
}
