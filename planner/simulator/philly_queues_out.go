package simulator

import (
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"sync"

	"github.com/caravan-nomad/caravan/internal/svgplot"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/caravan-nomad/caravan/planner/simulator/philly"
	"github.com/caravan-nomad/caravan/planner/workload"
)

// Files --philly-queues --out writes.
const (
	FileQueueVCsCSV     = "queues-vcs.csv"     // mode,vc,jobs,gpu_time_share,guarantee_gpus,mean_wait_s,p99_wait_s,mean_jct_s,mean_slowdown
	FileQueueSummaryCSV = "queues-summary.csv" // mode,cluster_gpus,jobs,mean_wait_s,mean_jct_s,utilisation,used_gpu_h,reclaims,reclaim_lost_gpu_h,lost_share,jain
	waitCDFPrefix       = "wait-cdf-"          // wait-cdf-<vc>.svg and wait-cdf-all.svg: queueing delay CDF per mode
)

// RunPhillyQueues replays rows under every mode (in parallel) and returns
// the reports by mode.
func RunPhillyQueues(cfg engine.Config, rows []workload.PhillyJob, modes []philly.QueueMode) (map[philly.QueueMode]philly.QueueReport, error) {
	out := map[philly.QueueMode]philly.QueueReport{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var first error
	for _, m := range modes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := philly.ReplayPhillyQueues(cfg, m, rows)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = fmt.Errorf("%s: %w", m, err)
			}
			out[m] = r
		}()
	}
	wg.Wait()
	return out, first
}

// PrintPhillyQueues prints the summary, the per-VC table and the goals.
func PrintPhillyQueues(w io.Writer, reps map[philly.QueueMode]philly.QueueReport, modes []philly.QueueMode) {
	ref := reps[modes[0]]
	commit, restore := philly.CheckpointTimes(1)
	fmt.Fprintf(w, "philly as teams: %d jobs, %d virtual clusters, %d GPUs (%d jobs larger than their VC's guarantee)\n",
		ref.Jobs, len(ref.VCs), ref.GPUs, reps[philly.ModeStrict].Oversize)
	fmt.Fprintf(w, "checkpoints modelled: %.0f GB per GPU, commit %.1f s and restore %.1f s per GPU (store: %.0f and %.0f MB/s)\n",
		philly.CheckpointGBPerGPU, commit, restore, philly.CommitMBps, philly.RestoreMBps)
	for _, m := range modes {
		fmt.Fprintln(w, reps[m])
	}
	fmt.Fprintf(w, "\n%-8s %6s %7s %5s", "vc", "jobs", "gpu%", "quota")
	for _, m := range modes {
		fmt.Fprintf(w, " | %-7s %8s %9s %8s", m, "wait_s", "p99_s", "jct_s")
	}
	fmt.Fprintln(w)
	for i, v := range ref.VCs {
		fmt.Fprintf(w, "%-8s %6d %7.3f %5d", v.VC, v.Jobs, 100*v.GPUShare, v.Guarantee)
		for _, m := range modes {
			s := reps[m].VCs[i]
			fmt.Fprintf(w, " | %-7s %8.0f %9.0f %8.0f", "", s.MeanWait, s.P99Wait, s.MeanJCT)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	for _, g := range philly.Goals(reps) {
		fmt.Fprintln(w, "goal:", g)
	}
}

// WritePhillyQueues writes the tables and the wait CDFs into dir.
func WritePhillyQueues(dir string, reps map[philly.QueueMode]philly.QueueReport, modes []philly.QueueMode) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	vcs := [][]string{{"mode", "vc", "jobs", "gpu_time_share", "guarantee_gpus", "mean_wait_s", "p99_wait_s", "mean_jct_s", "mean_slowdown"}}
	sum := [][]string{{"mode", "cluster_gpus", "jobs", "mean_wait_s", "mean_jct_s", "utilisation", "used_gpu_h", "reclaims", "reclaim_lost_gpu_h", "lost_share", "jain"}}
	all := svgplot.Chart{Title: "queueing delay, all jobs", XLabel: "wait (h)", YLabel: "fraction of jobs", Width: 720, Height: 400}
	charts := map[string]*svgplot.Chart{}
	for _, m := range modes {
		r := reps[m]
		sum = append(sum, []string{string(m), strconv.Itoa(r.GPUs), strconv.Itoa(r.Jobs), f(r.MeanWait), f(r.MeanJCT), f(r.Utilisation),
			f(r.UsedGPUSec / 3600), strconv.Itoa(r.Reclaims), f(r.LostGPUSec / 3600), f(r.LostGPUSec / math.Max(r.UsedGPUSec, 1)), f(r.Jain)})
		var every []float64
		for _, v := range r.VCs {
			vcs = append(vcs, []string{string(m), v.VC, strconv.Itoa(v.Jobs), f(v.GPUShare), strconv.Itoa(v.Guarantee), f(v.MeanWait),
				f(v.P99Wait), f(v.MeanJCT), f(v.Slowdown)})
			c := charts[v.VC]
			if c == nil {
				c = &svgplot.Chart{Title: fmt.Sprintf("queueing delay, VC %s (%d jobs, %.2f%% of GPU time, %d GPUs guaranteed)",
					v.VC, v.Jobs, 100*v.GPUShare, v.Guarantee), XLabel: "wait (h)", YLabel: "fraction of jobs", Width: 720, Height: 400}
				charts[v.VC] = c
			}
			c.Add(waitCDF(string(m), v.Waits()))
			every = append(every, v.Waits()...)
		}
		all.Add(waitCDF(string(m), every))
	}
	if err := writeCSV(dir, FileQueueVCsCSV, vcs); err != nil {
		return err
	}
	if err := writeCSV(dir, FileQueueSummaryCSV, sum); err != nil {
		return err
	}
	if err := writeSVG(dir, waitCDFPrefix+"all.svg", all.SVG()); err != nil {
		return err
	}
	for vc, c := range charts {
		if err := writeSVG(dir, waitCDFPrefix+safeName(vc)+".svg", c.SVG()); err != nil {
			return err
		}
	}
	return nil
}

// waitCDF is the CDF of waits in hours, at most 400 points (quantiles), so
// that 40,000-job curves stay small.
func waitCDF(name string, waits []float64) svgplot.Series {
	v := append([]float64(nil), waits...)
	sort.Float64s(v)
	const points = 400
	s := svgplot.Series{Name: name, Step: true}
	n := len(v)
	for k := 0; k <= points && n > 0; k++ {
		i := min(k*n/points, n-1)
		s.X = append(s.X, v[i]/3600)
		s.Y = append(s.Y, float64(i+1)/float64(n))
	}
	return s
}

func runPhillyQueues(cfg engine.Config, path, out string, stdout, stderr io.Writer) int {
	if cfg.Nodes == 0 {
		cfg.Nodes = 128
	}
	rows, err := workload.ReadPhilly(path)
	if err == nil {
		var reps map[philly.QueueMode]philly.QueueReport
		if reps, err = RunPhillyQueues(cfg, rows, philly.QueueModes); err == nil {
			PrintPhillyQueues(stdout, reps, philly.QueueModes)
			if out != "" {
				if err = WritePhillyQueues(out, reps, philly.QueueModes); err == nil {
					fmt.Fprintf(stdout, "wrote %s, %s and %s<vc>.svg, %sall.svg to %s\n", FileQueueVCsCSV, FileQueueSummaryCSV, waitCDFPrefix, waitCDFPrefix, out)
				}
			}
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}
