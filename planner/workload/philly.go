package workload

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"
)

// PhillyJob is one row of philly-jobs.csv.
type PhillyJob struct {
	Submit   time.Time
	Duration float64 // seconds of run time as recorded
	GPUs     int
	Cluster  string
}

// ReadPhilly reads philly-jobs.csv (timestamp,duration,num_gpus,gpu_time,
// cluster), sorted by submission time.
func ReadPhilly(path string) ([]PhillyJob, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParsePhilly(path, f)
}

// ParsePhilly is ReadPhilly on a reader.
func ParsePhilly(name string, r io.Reader) ([]PhillyJob, error) {
	t, err := parseTable(name, r, "timestamp", "duration", "num_gpus", "cluster")
	if err != nil {
		return nil, err
	}
	if len(t.rows) == 0 {
		return nil, &ParseError{File: name, Line: 2, Err: errors.New("no jobs")}
	}
	out := make([]PhillyJob, 0, len(t.rows))
	for i := range t.rows {
		var j PhillyJob
		ts := t.str(i, "timestamp")
		if j.Submit, err = time.Parse(time.DateTime, ts); err != nil {
			return nil, t.fail(i, "timestamp", fmt.Errorf("%q is not a time like 2017-10-09 07:01:55", ts))
		}
		if j.Duration, err = t.nonNeg(i, "duration"); err != nil {
			return nil, err
		}
		if j.GPUs, err = t.posInt(i, "num_gpus", MaxReplicas); err != nil {
			return nil, err
		}
		j.Cluster = t.str(i, "cluster")
		out = append(out, j)
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Submit.Before(out[b].Submit) })
	return out, nil
}

// Published is one row of published-avg-jct.csv.
type Published struct {
	Policy, Workload string
	Load             float64
	Jobs             int
	AvgJCT           float64 // seconds
}

// ReadPublished reads published-avg-jct.csv (policy,load,workload,jobs,avg_jct_s).
func ReadPublished(path string) ([]Published, error) {
	t, err := readTable(path, "policy", "load", "workload", "jobs", "avg_jct_s")
	if err != nil {
		return nil, err
	}
	var out []Published
	for i := range t.rows {
		p := Published{Policy: t.str(i, "policy"), Workload: t.str(i, "workload")}
		if p.Load, err = t.nonNeg(i, "load"); err != nil {
			return nil, err
		}
		if p.Jobs, err = t.posInt(i, "jobs", MaxPublishedJobs); err != nil {
			return nil, err
		}
		if p.AvgJCT, err = t.nonNeg(i, "avg_jct_s"); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
