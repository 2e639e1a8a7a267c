package workload

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// Bounds on workload values: anything larger is a clear error, not a
// simulation that allocates or loops without end.
const (
	// MaxReplicas is the most GPUs one job may ask for.
	MaxReplicas = 1 << 16
	// MaxBatchSize is the largest global batch size.
	MaxBatchSize = 1 << 24
	// MaxPublishedJobs bounds the jobs column of published results.
	MaxPublishedJobs = 1 << 24
)

// Job is one row of a workload file.
type Job struct {
	Name        string
	Time        float64 // submission, seconds from the workload's start
	Application string
	Replicas    int // requested GPUs (Tiresias, FIFO)
	BatchSize   int // requested global batch size (Optimus, Tiresias)
}

// ReadJobs reads a workload CSV (name,time,application,num_replicas,
// batch_size), sorted by time then file order. Applications are checked
// against known when known is non-nil.
func ReadJobs(path string, known map[string]bool) ([]Job, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseJobs(path, f, known)
}

// ParseJobs is ReadJobs on a reader; name is used in errors.
func ParseJobs(name string, r io.Reader, known map[string]bool) ([]Job, error) {
	t, err := parseTable(name, r, "name", "time", "application", "num_replicas", "batch_size")
	if err != nil {
		return nil, err
	}
	if len(t.rows) == 0 {
		return nil, &ParseError{File: name, Line: 2, Err: errors.New("no jobs")}
	}
	jobs := make([]Job, 0, len(t.rows))
	seen := map[string]int{}
	for i := range t.rows {
		j := Job{Name: t.str(i, "name"), Application: t.str(i, "application")}
		if j.Name == "" {
			return nil, t.fail(i, "name", errors.New("empty job name"))
		}
		if prev, dup := seen[j.Name]; dup {
			return nil, t.fail(i, "name", fmt.Errorf("duplicate job name %q (first on line %d)", j.Name, prev))
		}
		seen[j.Name] = t.line[i]
		if j.Time, err = t.nonNeg(i, "time"); err != nil {
			return nil, err
		}
		if known != nil && !known[j.Application] {
			return nil, t.fail(i, "application", fmt.Errorf("unknown application %q", j.Application))
		}
		if j.Replicas, err = t.posInt(i, "num_replicas", MaxReplicas); err != nil {
			return nil, err
		}
		if j.BatchSize, err = t.posInt(i, "batch_size", MaxBatchSize); err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Time < jobs[b].Time })
	return jobs, nil
}
