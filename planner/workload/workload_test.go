package workload

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

func TestParseJobs(t *testing.T) {
	in := "name,time,application,num_replicas,batch_size\nb,20,ncf,1,32768\na,10,cifar10,6,2048\n"
	jobs, err := ParseJobs("w.csv", strings.NewReader(in), map[string]bool{"ncf": true, "cifar10": true})
	must.NoError(t, err)
	must.Eq(t, []Job{
		{Name: "a", Time: 10, Application: "cifar10", Replicas: 6, BatchSize: 2048},
		{Name: "b", Time: 20, Application: "ncf", Replicas: 1, BatchSize: 32768},
	}, jobs)
}

func TestParseJobsErrorsNameLineAndColumn(t *testing.T) {
	known := map[string]bool{"ncf": true}
	header := "name,time,application,num_replicas,batch_size\n"
	cases := []struct {
		name   string
		body   string
		line   int
		column string
		text   string
	}{
		{"not a number", header + "a,10,ncf,1,32\nb,soon,ncf,1,32\n", 3, "time", `"soon" is not a number`},
		{"negative time", header + "a,-5,ncf,1,32\n", 2, "time", "negative"},
		{"zero replicas", header + "a,1,ncf,0,32\n", 2, "num_replicas", "not positive"},
		{"fractional batch", header + "a,1,ncf,1,32.5\n", 2, "batch_size", "not an integer"},
		{"unknown application", header + "a,1,resnet,1,32\n", 2, "application", `unknown application "resnet"`},
		{"duplicate name", header + "a,1,ncf,1,32\na,2,ncf,1,32\n", 3, "name", "duplicate"},
		{"missing column", "name,time,application,batch_size\na,1,ncf,32\n", 1, "num_replicas", "missing column"},
		{"short row", header + "a,1,ncf\n", 2, "", "has 3 fields"},
		{"empty", "", 1, "", "empty file"},
		{"no jobs", header, 2, "", "no jobs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseJobs("w.csv", strings.NewReader(tc.body), known)
			must.Error(t, err)
			var pe *ParseError
			must.True(t, errors.As(err, &pe), must.Sprintf("%T %v", err, err))
			must.Eq(t, "w.csv", pe.File)
			must.Eq(t, tc.line, pe.Line)
			must.Eq(t, tc.column, pe.Column)
			must.StrContains(t, err.Error(), tc.text)
			must.StrContains(t, err.Error(), "w.csv:")
		})
	}
	_, err := ParseJobs("w.csv", strings.NewReader("name,time,application,num_replicas,batch_size\na,1,ncf,1,32\n"), nil)
	must.NoError(t, err)
	var pe *ParseError
	_, err = ParseJobs("w.csv", strings.NewReader(header+"a,1,ncf,1,32\n"), map[string]bool{})
	must.True(t, errors.As(err, &pe))
	must.True(t, errors.Is(err, pe.Err))
}

func TestParsePhilly(t *testing.T) {
	in := "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,11cb48\n2017-10-09 06:13:03,2951.0,2,5902.0,6214e9\n"
	jobs, err := ParsePhilly("p.csv", strings.NewReader(in))
	must.NoError(t, err)
	must.Eq(t, 2, len(jobs))
	must.Eq(t, 2, jobs[0].GPUs) // sorted by submission
	_, err = ParsePhilly("p.csv", strings.NewReader("timestamp,duration,num_gpus,gpu_time,cluster\nyesterday,1,1,1,x\n"))
	var pe *ParseError
	must.True(t, errors.As(err, &pe))
	must.Eq(t, "timestamp", pe.Column)
	must.Eq(t, 2, pe.Line)
}

func TestReadTraceErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		must.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	write("placements.csv", "placement,local_bsz,step_time,sync_time\n12,32,0.1,0.01\n1x,32,0.1,0.01\n")
	write("scalability.csv", "num_nodes,num_replicas,local_bsz,step_time,sync_time\n")
	write("validation-32.csv", "progress,iteration,metric,grad_sqr,grad_var\n1,1,0.5,1,1\n")
	_, err := ReadTrace(dir)
	var pe *ParseError
	must.True(t, errors.As(err, &pe), must.Sprintf("%v", err))
	must.Eq(t, 3, pe.Line)
	must.Eq(t, "placement", pe.Column)
	write("placements.csv", "placement,local_bsz,step_time,sync_time\n12,32,0.1,0.01\n")
	tr, err := ReadTrace(dir)
	must.NoError(t, err)
	must.Eq(t, []int{1, 2}, tr.Placements[0].Placement)
	must.Eq(t, 1, len(tr.Validation[32]))
}

func TestParseJobsSkipsUTF8BOM(t *testing.T) {
	cases := []struct{ name, in string }{
		{"bom", "\uFEFFname,time,application,num_replicas,batch_size\na,10,ncf,1,32\n"},
		{"bom and crlf", "\uFEFFname,time,application,num_replicas,batch_size\r\na,10,ncf,1,32\r\n"},
		{"no bom", "name,time,application,num_replicas,batch_size\na,10,ncf,1,32\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			jobs, err := ParseJobs("w.csv", strings.NewReader(tc.in), map[string]bool{"ncf": true})
			must.NoError(t, err)
			must.Eq(t, []Job{{Name: "a", Time: 10, Application: "ncf", Replicas: 1, BatchSize: 32}}, jobs)
		})
	}
	// A BOM anywhere else is data, and the error shows it escaped.
	_, err := ParseJobs("w.csv", strings.NewReader("name,\uFEFFtime,application,num_replicas,batch_size\n"), nil)
	must.ErrorIs(t, err, ErrMissingColumn)
	must.ErrorContains(t, err, `\ufefftime`)
}
