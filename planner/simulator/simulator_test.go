package simulator

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caravan-nomad/caravan/planner/simulator/pollux"
	"github.com/caravan-nomad/caravan/planner/simulator/pollux/polluxtest"
	"github.com/caravan-nomad/caravan/planner/workload"
	"github.com/shoenig/test/must"
)

func sharedData(t *testing.T) string {
	t.Helper()
	return polluxtest.Dir(t)
}

func smallWorkload(t *testing.T, dir string, n int) ([]workload.Job, map[string]*pollux.Application) {
	t.Helper()
	apps, err := pollux.LoadApplications(dir)
	must.NoError(t, err)
	jobs, err := workload.ReadJobs(filepath.Join(dir, "workloads", "workload-1.csv"), pollux.Known(apps))
	must.NoError(t, err)
	// Keep the short-lived kinds so the replay stays fast.
	var out []workload.Job
	for _, j := range jobs {
		if j.Application == "cifar10" || j.Application == "ncf" {
			out = append(out, j)
		}
		if len(out) == n {
			break
		}
	}
	return out, apps
}

func TestCLI(t *testing.T) {
	dir := sharedData(t)
	tmp := t.TempDir()
	good := filepath.Join(tmp, "good.csv")
	must.NoError(t, os.WriteFile(good, []byte("name,time,application,num_replicas,batch_size\nncf-0,0,ncf,1,32768\ncifar10-1,30,cifar10,2,256\n"), 0o644))
	var out, errb bytes.Buffer
	code := run([]string{"--data", dir, "--policy", "optimus", "--workload", good, "--jobs"}, &out, &errb)
	must.Eq(t, 0, code, must.Sprintf("stderr: %s", errb.String()))
	must.StrContains(t, out.String(), "average JCT")
	must.StrContains(t, out.String(), "cifar10-1")

	bad := filepath.Join(tmp, "bad.csv")
	must.NoError(t, os.WriteFile(bad, []byte("name,time,application,num_replicas,batch_size\nncf-0,0,ncf,1,32768\ncifar10-1,soon,cifar10,2,256\n"), 0o644))
	out.Reset()
	errb.Reset()
	code = run([]string{"--data", dir, "--workload", bad}, &out, &errb)
	must.Eq(t, 1, code)
	must.StrContains(t, errb.String(), "bad.csv:3: column \"time\"")

	errb.Reset()
	code = run([]string{"--data", dir, "--policy", "nope", "--workload", good}, &out, &errb)
	must.Eq(t, 2, code)
	must.StrContains(t, errb.String(), `-policy: unknown policy "nope"`)

	errb.Reset()
	code = run([]string{"--data", dir, "--policy", "fifo,nope", "--workload", good}, &out, &errb)
	must.Eq(t, 2, code)
	must.StrContains(t, errb.String(), `-policy: unknown policy "nope"`)

	errb.Reset()
	code = run([]string{"--data", dir, "--policy", "fifo,tiresias", "--philly"}, &out, &errb)
	must.Eq(t, 2, code)
	must.StrContains(t, errb.String(), "-policy: --philly replays one policy")
}

func TestCLIRejectsInvalidFlagValues(t *testing.T) {
	good := filepath.Join(t.TempDir(), "w.csv")
	must.NoError(t, os.WriteFile(good, []byte("name,time,application,num_replicas,batch_size\nncf-0,0,ncf,1,32768\n"), 0o644))
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--gpus", "-1", "--workload", good}, "-gpus: must be at least 1, got -1"},
		{[]string{"--nodes", "0", "--workload", good}, "-nodes: must be at least 1, got 0"},
		{[]string{"--interference", "5", "--workload", good}, "-interference: must be between 0 and 1, got 5"},
		{[]string{"--interval", "0", "--workload", good}, "-interval: must be greater than 0"},
		{[]string{"--interval", "NaN", "--workload", good}, "-interval: must be greater than 0, got NaN"},
		{[]string{"--workers", "0", "--sweep"}, "-workers: must be at least 1"},
		{[]string{"--hours", "25", "--generate", "3"}, "-hours: must be between 1 and 24"},
		{[]string{"--start", "-1", "--generate", "3"}, "-start: must be between 0 and 23"},
		{[]string{"--generate", "-3"}, "-generate: must be at least 0"},
		{[]string{"--policies", "fifo,magic", "--table"}, `-policies: unknown policy "magic"`},
		{[]string{"--workload", good, "stray"}, `unexpected argument "stray"`},
		{[]string{"--data", "/nonexistent", "--workload", good}, "-data: data directory /nonexistent has no traces/ folder"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			must.Eq(t, 2, run(tc.args, &out, &errb), must.Sprint(errb.String()))
			must.StrContains(t, errb.String(), "caravan planner simulate: "+tc.want)
		})
	}
}
