package simulator

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/workload"
	"github.com/shoenig/test/must"
)

func sharedData(t *testing.T) string {
	t.Helper()
	dir, err := FindData("")
	if err != nil {
		t.Skip("shared Pollux data not present:", err)
	}
	return dir
}

func smallWorkload(t *testing.T, dir string, n int) ([]workload.Job, map[string]*Application) {
	t.Helper()
	apps, err := LoadApplications(dir)
	must.NoError(t, err)
	jobs, err := workload.ReadJobs(filepath.Join(dir, "workloads", "workload-1.csv"), Known(apps))
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

func TestCanonicalPlacement(t *testing.T) {
	cases := []struct {
		in   []int
		want string
	}{
		{[]int{1}, "1"},
		{[]int{2, 1, 1}, "112"},
		{[]int{4, 0, 2}, "24"},
		{[]int{1, 2, 1, 2}, "1212"},
		{[]int{3, 1, 2}, "123"},
	}
	for _, tc := range cases {
		must.Eq(t, tc.want, canonical(tc.in))
	}
}

func TestApplicationMatchesTraces(t *testing.T) {
	dir := sharedData(t)
	apps, err := LoadApplications(dir)
	must.NoError(t, err)
	a := apps["cifar10"]
	must.Eq(t, 100, a.MaxEpochs)
	must.Eq(t, 128.0, a.InitBatch)
	// A measured placement and batch returns the measured row.
	tr, err := workload.ReadTrace(filepath.Join(dir, "traces", "cifar10"))
	must.NoError(t, err)
	for _, row := range tr.Placements[:20] {
		st, sy := a.Throughput(row.Placement, row.LocalBsz)
		must.True(t, math.Abs(row.StepTime-st) < 1e-12 && math.Abs(row.SyncTime-sy) < 1e-12,
			must.Sprintf("placement %v bsz %v: %v,%v want %v,%v", row.Placement, row.LocalBsz, st, sy, row.StepTime, row.SyncTime))
	}
	// A measured scalability point (16 nodes) through the grid.
	for _, row := range tr.Scalability[:10] {
		st, _ := a.grid.at(row.Nodes, row.Replicas, row.LocalBsz)
		must.True(t, st > 0)
	}
	// Progress is monotone and the yolov3 override applies.
	for e := 1; e <= a.MaxEpochs; e++ {
		must.True(t, a.Progress(e) >= a.Progress(e-1))
	}
	must.Eq(t, 8.0, apps["yolov3"].MaxLocalBsz)
}

func TestSimulateDeterministicAndComplete(t *testing.T) {
	dir := sharedData(t)
	jobs, apps := smallWorkload(t, dir, 24)
	for _, p := range policy.Names() {
		t.Run(p, func(t *testing.T) {
			a, err := Simulate(Config{}, p, jobs, apps)
			must.NoError(t, err)
			b, err := Simulate(Config{}, p, jobs, apps)
			must.NoError(t, err)
			a.DecideTime, b.DecideTime = 0, 0
			must.True(t, reflect.DeepEqual(a, b), must.Sprintf("%s not deterministic", p))
			must.Eq(t, len(jobs), len(a.Jobs))
			for _, j := range a.Jobs {
				must.True(t, j.JCT > 0, must.Sprintf("%s: %s JCT %v", p, j.Name, j.JCT))
			}
			must.True(t, a.GPUUtil > 0 && a.GPUUtil <= 1.0001, must.Sprintf("util %v", a.GPUUtil))
		})
	}
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

func TestFindDataHasNoAbsoluteFallback(t *testing.T) {
	t.Setenv(DataEnv, "")
	t.Chdir(t.TempDir())
	dir, err := FindData("")
	// The test binary lives in a temporary build directory, away from any
	// checkout, so nothing may be found.
	if err == nil {
		must.StrNotContains(t, dir, "/work/shared", must.Sprint("found through a fixed path"))
		return
	}
	must.ErrorContains(t, err, "pass --data")

	t.Setenv(DataEnv, "/nonexistent")
	_, err = FindData("")
	must.ErrorContains(t, err, "$"+DataEnv)
}

func TestReplayPhillySmall(t *testing.T) {
	tmp := t.TempDir()
	path := filepath.Join(tmp, "philly.csv")
	var b strings.Builder
	b.WriteString("timestamp,duration,num_gpus,gpu_time,cluster\n")
	b.WriteString("2017-10-09 07:00:00,600,1,600,a\n2017-10-09 07:00:30,3600,4,14400,a\n2017-10-09 07:01:00,1200,8,9600,a\n2017-10-09 09:00:00,60,2,120,a\n")
	must.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	for _, p := range []string{"fifo", "tiresias", "optimus", "goodput"} {
		rep, err := ReplayPhilly(Config{Nodes: 2, GPUsPerNode: 4}, p, path)
		must.NoError(t, err, must.Sprintf("%s", p))
		must.Eq(t, 4, rep.Jobs)
		must.True(t, rep.AvgJCT >= 60, must.Sprintf("%s avg %v", p, rep.AvgJCT))
	}
	_, err := ReplayPhilly(Config{Nodes: 1, GPUsPerNode: 4}, "fifo", path)
	must.ErrorContains(t, err, "asks 8 GPUs")
}
