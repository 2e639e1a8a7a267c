package workload

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// PlacementRow is one measurement of placements.csv: a job spread over
// nodes as Placement (one digit per node: GPUs on that node), at a local
// (per-GPU) batch size.
type PlacementRow struct {
	Placement []int
	LocalBsz  float64
	StepTime  float64 // seconds per step
	SyncTime  float64 // seconds of it spent synchronising
}

// ScalabilityRow is one measurement of scalability.csv.
type ScalabilityRow struct {
	Nodes, Replicas    int
	LocalBsz           float64
	StepTime, SyncTime float64
}

// ValidationRow is one epoch of validation-<batch>.csv.
type ValidationRow struct {
	Progress  float64 // cumulative progress (samples at efficiency 1)
	Iteration float64 // cumulative steps
	Metric    float64
	GradSqr   float64
	GradVar   float64
}

// Trace is everything measured for one model.
type Trace struct {
	Name        string
	Placements  []PlacementRow
	Scalability []ScalabilityRow
	// Validation maps a global batch size to its per-epoch rows.
	Validation map[int][]ValidationRow
}

// ReadTrace reads a model's trace directory.
func ReadTrace(dir string) (*Trace, error) {
	tr := &Trace{Name: filepath.Base(dir)}
	var err error
	if tr.Placements, err = readPlacements(dir); err != nil {
		return nil, err
	}
	if tr.Scalability, err = readScalability(dir); err != nil {
		return nil, err
	}
	if tr.Validation, err = readValidation(dir); err != nil {
		return nil, err
	}
	return tr, nil
}

// readPlacements reads dir/placements.csv.
func readPlacements(dir string) ([]PlacementRow, error) {
	var out []PlacementRow
	pt, err := readTable(filepath.Join(dir, "placements.csv"), "placement", "local_bsz", "step_time", "sync_time")
	if err != nil {
		return nil, err
	}
	for i := range pt.rows {
		s := pt.str(i, "placement")
		var pl []int
		for _, c := range s {
			if c < '1' || c > '9' {
				return nil, pt.fail(i, "placement", fmt.Errorf("%q: want one digit 1-9 per node", s))
			}
			pl = append(pl, int(c-'0'))
		}
		if len(pl) == 0 {
			return nil, pt.fail(i, "placement", errors.New("empty placement"))
		}
		r := PlacementRow{Placement: pl}
		if r.LocalBsz, err = pt.nonNeg(i, "local_bsz"); err != nil {
			return nil, err
		}
		if r.StepTime, err = pt.nonNeg(i, "step_time"); err != nil {
			return nil, err
		}
		if r.SyncTime, err = pt.nonNeg(i, "sync_time"); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// readScalability reads dir/scalability.csv.
func readScalability(dir string) ([]ScalabilityRow, error) {
	var out []ScalabilityRow
	st, err := readTable(filepath.Join(dir, "scalability.csv"), "num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
	if err != nil {
		return nil, err
	}
	for i := range st.rows {
		var r ScalabilityRow
		if r.Nodes, err = st.posInt(i, "num_nodes", MaxReplicas); err != nil {
			return nil, err
		}
		if r.Replicas, err = st.posInt(i, "num_replicas", MaxReplicas); err != nil {
			return nil, err
		}
		if r.LocalBsz, err = st.nonNeg(i, "local_bsz"); err != nil {
			return nil, err
		}
		if r.StepTime, err = st.nonNeg(i, "step_time"); err != nil {
			return nil, err
		}
		if r.SyncTime, err = st.nonNeg(i, "sync_time"); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// readValidation reads every dir/validation-<batch size>.csv, by batch size.
func readValidation(dir string) (map[int][]ValidationRow, error) {
	out := map[int][]ValidationRow{}
	files, err := filepath.Glob(filepath.Join(dir, "validation-*.csv"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no validation-<batch>.csv files", dir)
	}
	sort.Strings(files)
	for _, f := range files {
		base := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "validation-"), ".csv")
		bsz, err := strconv.Atoi(base)
		if err != nil || bsz <= 0 {
			return nil, fmt.Errorf("%s: file name must be validation-<batch size>.csv", f)
		}
		vt, err := readTable(f, "progress", "iteration", "metric", "grad_sqr", "grad_var")
		if err != nil {
			return nil, err
		}
		rows := make([]ValidationRow, len(vt.rows))
		for i := range vt.rows {
			r := &rows[i]
			if r.Progress, err = vt.nonNeg(i, "progress"); err != nil {
				return nil, err
			}
			if r.Iteration, err = vt.nonNeg(i, "iteration"); err != nil {
				return nil, err
			}
			if r.Metric, err = vt.float(i, "metric"); err != nil {
				return nil, err
			}
			if r.GradSqr, err = vt.nonNeg(i, "grad_sqr"); err != nil {
				return nil, err
			}
			if r.GradVar, err = vt.nonNeg(i, "grad_var"); err != nil {
				return nil, err
			}
		}
		if len(rows) == 0 {
			return nil, &ParseError{File: f, Line: 2, Err: errors.New("no epochs")}
		}
		out[bsz] = rows
	}
	return out, nil
}

// ReadTraces reads every model directory under dir.
func ReadTraces(dir string) (map[string]*Trace, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]*Trace{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		tr, err := ReadTrace(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out[tr.Name] = tr
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no model trace directories", dir)
	}
	return out, nil
}
