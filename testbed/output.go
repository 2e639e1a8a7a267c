package testbed

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/caravan-nomad/caravan/internal/bytesize"
)

// Results is everything one `caravan testbed` invocation measured.
type Results struct {
	Options SampleOptions `json:"options"`
	Cluster Cluster       `json:"cluster"`
	// Calibration is fitted on every run; each Fidelity's own (out of
	// sample where it can be) is the one its simulation used.
	Calibration Calibration `json:"calibration"`
	Workload    []Job       `json:"workload"`
	Runs        []*Run      `json:"runs"`
	Fidelity    []Fidelity  `json:"fidelity"` // one per run, same order
	// Interval and Cooldown are the planner's.
	Interval time.Duration `json:"interval_ns"`
	Cooldown time.Duration `json:"cooldown_ns"`
	// ResizeCost is what the jobs declared a resize costs them (0 in
	// results written before it was declared: the planner's restart cost).
	ResizeCost time.Duration `json:"resize_cost_ns"`
	// ReportSteps is the jobs' steps between progress reports (0 in
	// results written before it was recorded: the jobspec's 50).
	ReportSteps int `json:"report_steps"`
	// Quantum is the planner's suspend quantum (0 in results written
	// before it was recorded: the jobspec's 10 minutes).
	Quantum time.Duration `json:"suspend_quantum_ns"`
	// TimelineStep is the sampling step of timeline.csv.
	TimelineStep time.Duration `json:"timeline_step_ns"`
}

func (r *Results) fidelity(pol string) *Fidelity {
	for i := range r.Fidelity {
		if r.Fidelity[i].Policy == pol {
			return &r.Fidelity[i]
		}
	}
	return nil
}

func (r *Results) baseline() *Run {
	for _, run := range r.Runs {
		if run.Policy == Static {
			return run
		}
	}
	return nil
}

// vsStatic is a run's mean JCT over the static baseline's (0 if unknown).
func (r *Results) vsStatic(run *Run) float64 {
	b := r.baseline()
	if b == nil || b.Summary.AvgJCT <= 0 {
		return 0
	}
	return run.Summary.AvgJCT.Seconds() / b.Summary.AvgJCT.Seconds()
}

// PrintTable writes the per-policy table with the simulator's figures.
func PrintTable(w io.Writer, r *Results) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tjobs\tdone\tavg JCT\tvs static\tmakespan\tGPU util\trestarts\tcheckpoints\tckpt size\tsim policy\tsim avg JCT\tJCT error\tmax job error\tcalibration\t")
	for _, run := range r.Runs {
		s := run.Summary
		f := r.fidelity(run.Policy)
		simPol, simJCT, errS, maxS, calS := "-", "-", "-", "-", "-"
		if f != nil {
			simPol, simJCT = f.SimPolicy, dur(f.SimAvgJCT)
			errS, maxS, calS = pct(f.Error), pct(f.MaxAbsJobError()), f.CalibrationLabel()
		}
		vs := "-"
		if x := r.vsStatic(run); x > 0 {
			vs = fmt.Sprintf("%.2fx", x)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%.0f%%\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", run.Policy, s.Jobs, s.Finished,
			dur(s.AvgJCT), vs, dur(s.Makespan), 100*s.Util, s.Restarts, s.Checkpoints, bytesize.Human(s.CheckpointBytes),
			simPol, simJCT, errS, maxS, calS)
	}
	tw.Flush()
}

func dur(d time.Duration) string { return d.Round(time.Second).String() }

func pct(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*x)
}

// Write writes the results under dir (see testbed/README.md for the
// layout): results.json, summary.csv, jobs.csv, timeline.csv, workload.csv.
func Write(dir string, r *Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := []struct {
		name  string
		write func(io.Writer, *Results) error
	}{
		{"results.json", writeJSON}, {"summary.csv", writeSummary}, {"jobs.csv", writeJobs},
		{"timeline.csv", writeTimeline}, {"workload.csv", writeWorkload},
	}
	for _, f := range files {
		if err := writeFile(filepath.Join(dir, f.name), func(w io.Writer) error { return f.write(w, r) }); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

// writeFile writes through a temporary file so a reader never sees half.
func writeFile(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func writeJSON(w io.Writer, r *Results) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func writeCSV(w io.Writer, header []string, rows [][]string) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return err
	}
	if err := cw.WriteAll(rows); err != nil {
		return err
	}
	return cw.Error()
}

func f3(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return ""
	}
	return strconv.FormatFloat(x, 'f', 3, 64)
}

func sec(d time.Duration) string { return f3(d.Seconds()) }

// since is t's seconds from start, "" for a zero time.
func since(t, start time.Time) string {
	if t.IsZero() {
		return ""
	}
	return sec(t.Sub(start))
}

func writeSummary(w io.Writer, r *Results) error {
	header := []string{"policy", "sim_policy", "jobs", "finished", "avg_jct_s", "makespan_s", "gpu_util", "restarts",
		"checkpoints", "checkpoint_bytes", "max_checkpoint_bytes", "jct_vs_static", "sim_avg_jct_s", "sim_makespan_s",
		"mean_jct_error", "max_job_jct_error", "timed_out", "sim_in_sample"}
	var rows [][]string
	for _, run := range r.Runs {
		s := run.Summary
		row := []string{run.Policy, SimLabel(run.Policy), strconv.Itoa(s.Jobs), strconv.Itoa(s.Finished), sec(s.AvgJCT),
			sec(s.Makespan), f3(s.Util), strconv.Itoa(s.Restarts), strconv.Itoa(s.Checkpoints),
			strconv.FormatInt(s.CheckpointBytes, 10), strconv.FormatInt(s.MaxCheckpointBytes, 10), f3(r.vsStatic(run))}
		f := r.fidelity(run.Policy)
		inSample := ""
		if f != nil {
			row = append(row, sec(f.SimAvgJCT), sec(f.SimMakespan), f3(f.Error), f3(f.MaxAbsJobError()))
			inSample = strconv.FormatBool(f.InSample)
		} else {
			row = append(row, "", "", "", "")
		}
		rows = append(rows, append(row, strconv.FormatBool(run.TimedOut), inSample))
	}
	return writeCSV(w, header, rows)
}

func writeJobs(w io.Writer, r *Results) error {
	header := []string{"policy", "job", "model", "requested_workers", "steps", "compute_per_sample_ms", "arrival_s",
		"submitted_s", "started_s", "finished_s", "jct_s", "queued_s", "gpu_seconds", "max_workers", "restarts",
		"checkpoints", "checkpoint_bytes", "sim_jct_s", "jct_error"}
	var rows [][]string
	for _, run := range r.Runs {
		f := r.fidelity(run.Policy)
		for i, m := range run.Jobs {
			j := Job{}
			if i < len(r.Workload) {
				j = r.Workload[i]
			}
			row := []string{run.Policy, m.Name, j.Model, strconv.Itoa(j.Workers), strconv.Itoa(j.Steps),
				f3(float64(j.ComputePerSample) / float64(time.Millisecond)), sec(j.Arrival),
				since(m.Submitted, run.Start), since(m.Started, run.Start), since(m.Finished, run.Start),
				jctOrEmpty(m.JCT), sec(m.Queued), f3(m.WorkerSeconds * r.Cluster.WorkerGPUs()), strconv.Itoa(m.MaxWorkers),
				strconv.Itoa(m.Restarts), strconv.Itoa(m.Checkpoints), strconv.FormatInt(m.CheckpointBytes, 10)}
			if f != nil && i < len(f.JobSim) {
				row = append(row, sec(f.JobSim[i]), f3(f.JobError[i]))
			} else {
				row = append(row, "", "")
			}
			rows = append(rows, row)
		}
	}
	return writeCSV(w, header, rows)
}

func jctOrEmpty(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return sec(d)
}

func writeTimeline(w io.Writer, r *Results) error {
	header := []string{"policy", "t_s", "running", "queued", "finished", "workers", "gpus", "gpu_util"}
	var rows [][]string
	for _, run := range r.Runs {
		for _, p := range Timeline(run.Records, r.Cluster, run.Start, run.End, r.TimelineStep) {
			rows = append(rows, []string{run.Policy, sec(p.At), strconv.Itoa(p.Running), strconv.Itoa(p.Queued),
				strconv.Itoa(p.Finished), strconv.Itoa(p.Workers), f3(p.GPUs), f3(p.Util)})
		}
	}
	return writeCSV(w, header, rows)
}

func writeWorkload(w io.Writer, r *Results) error {
	header := []string{"job", "model", "arrival_s", "requested_workers", "steps", "compute_per_sample_ms",
		"trace_arrival_s", "trace_replicas", "trace_steps", "trace_seconds_per_sample"}
	var rows [][]string
	for _, j := range r.Workload {
		rows = append(rows, []string{j.Name, j.Model, sec(j.Arrival), strconv.Itoa(j.Workers), strconv.Itoa(j.Steps),
			f3(float64(j.ComputePerSample) / float64(time.Millisecond)), f3(j.TraceArrival), strconv.Itoa(j.TraceReplicas),
			f3(j.TraceSteps), strconv.FormatFloat(j.TraceSecondsPerSample, 'g', 6, 64)})
	}
	return writeCSV(w, header, rows)
}
