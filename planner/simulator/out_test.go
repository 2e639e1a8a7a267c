package simulator

import (
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/simulator/engine"
)

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	fh, err := os.Open(path)
	must.NoError(t, err)
	defer fh.Close()
	rows, err := csv.NewReader(fh).ReadAll()
	must.NoError(t, err)
	return rows
}

func wellFormedSVG(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must.NoError(t, err)
	d := xml.NewDecoder(strings.NewReader(string(b)))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else {
			must.NoError(t, err, must.Sprintf("%s", path))
		}
	}
	return string(b)
}

func TestWriteRun(t *testing.T) {
	res := engine.Result{Policy: "optimus", Workload: "w.csv", GPUs: 4, AvgJCT: 150, Jobs: []engine.JobResult{
		{Name: "a<&>", Application: "cifar10", Submitted: 0, Completed: 100, JCT: 100, Restarts: 1},
		{Name: "b", Application: "bert", Submitted: 60, Completed: 260, JCT: 200},
	}, Trace: []engine.TraceRound{{Time: 0, GPUs: []int{0, 0}}, {Time: 60, GPUs: []int{4, 0}}, {Time: 120, GPUs: []int{2, 2}}, {Time: 180, GPUs: []int{0, 2}}}}
	dir := filepath.Join(t.TempDir(), "out")
	must.NoError(t, WriteRun(dir, []engine.Result{res, {Policy: "fifo", Workload: "w.csv", GPUs: 4, Jobs: res.Jobs}}))

	jobs := readCSV(t, filepath.Join(dir, FileJobsCSV))
	must.Eq(t, []string{"policy", "workload", "job", "application", "submitted_s", "completed_s", "jct_s", "restarts"}, jobs[0])
	must.Eq(t, []string{"optimus", "w.csv", "a<&>", "cifar10", "0", "100", "100", "1"}, jobs[1])
	must.SliceLen(t, 5, jobs)

	rounds := readCSV(t, filepath.Join(dir, FileRoundsCSV))
	must.Eq(t, [][]string{{"policy", "time_s", "job", "gpus"}, {"optimus", "60", "a<&>", "4"}, {"optimus", "120", "a<&>", "2"},
		{"optimus", "120", "b", "2"}, {"optimus", "180", "b", "2"}}, rounds)
	util := readCSV(t, filepath.Join(dir, FileUtilCSV))
	must.Eq(t, []string{"optimus", "120", "4", "4", "1.0000"}, util[3])

	var runs []runJSON
	b, err := os.ReadFile(filepath.Join(dir, FileRunsJSON))
	must.NoError(t, err)
	must.NoError(t, json.Unmarshal(b, &runs))
	must.SliceLen(t, 2, runs)
	must.Eq(t, "oracle", runs[0].Class)
	must.Eq(t, "a<&>", runs[0].Jobs[0].Name)

	cdf := wellFormedSVG(t, filepath.Join(dir, FileJCTCDF))
	must.StrContains(t, cdf, "optimus (oracle)")
	must.StrContains(t, cdf, "fifo (declared)")
	wellFormedSVG(t, filepath.Join(dir, FileUtilSVG))
	alloc := wellFormedSVG(t, filepath.Join(dir, "allocation-optimus.svg"))
	must.StrContains(t, alloc, "a&lt;&amp;&gt;")
	_, err = os.Stat(filepath.Join(dir, "allocation-fifo.svg"))
	must.ErrorIs(t, err, os.ErrNotExist) // no trace recorded
}

func TestWriteSweep(t *testing.T) {
	dir := t.TempDir()
	cells := []SweepCell{{Policy: "optimus", Class: "oracle", Load: 1, JCT: []float64{3600, 7200}},
		{Policy: "goodput", Class: "online", Load: 1, JCT: []float64{1800, 1800}},
		{Policy: "goodput", Class: "online", Load: 0.5, JCT: []float64{900, 900}}}
	must.NoError(t, WriteSweep(dir, cells, Sweep{Loads: []float64{1, 0.5}, Seeds: []uint64{11, 12}}))
	rows := readCSV(t, filepath.Join(dir, FileSweepCSV))
	must.Eq(t, []string{"optimus", "oracle", "1", "11", "3600"}, rows[1])
	must.SliceLen(t, 7, rows)
	svg := wellFormedSVG(t, filepath.Join(dir, FileJCTByLoad))
	must.StrContains(t, svg, "optimus (oracle)")
	must.StrContains(t, svg, "goodput (online)")
	var js []sweepJSON
	b, err := os.ReadFile(filepath.Join(dir, FileSweepJSON))
	must.NoError(t, err)
	must.NoError(t, json.Unmarshal(b, &js))
	must.Eq(t, 5400.0, js[0].Mean)
}

func TestRun_OutNeedsWorkloadOrSweep(t *testing.T) {
	var out, errb strings.Builder
	data := t.TempDir() // a data directory that passes the --data check
	must.NoError(t, os.Mkdir(filepath.Join(data, "traces"), 0o755))
	code := run([]string{"--out", t.TempDir(), "--data", data}, &out, &errb)
	must.Eq(t, 2, code)
	must.StrContains(t, errb.String(), "--out works with --workload or --sweep")
}
