package pollux

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/caravan-nomad/caravan/planner/workload"
	"github.com/shoenig/test/must"
)

// TestConfigurationsMatchArtifactWorkloads checks that the (replicas,
// batch) choices we derive from the traces are exactly those the artifact's
// published workloads use.
func TestConfigurationsMatchArtifactWorkloads(t *testing.T) {
	dir := sharedData(t)
	apps, err := LoadApplications(dir)
	must.NoError(t, err)
	want := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(dir, "workloads", "*.csv"))
	for _, f := range files {
		jobs, err := workload.ReadJobs(f, Known(apps))
		must.NoError(t, err)
		for _, j := range jobs {
			want[fmt.Sprintf("%s,%d,%d", j.Application, j.Replicas, j.BatchSize)] = true
		}
	}
	got := map[string]bool{}
	for name, a := range apps {
		for _, c := range a.Configurations(0.5, 0.8) {
			got[fmt.Sprintf("%s,%d,%d", name, c.Replicas, c.BatchSize)] = true
		}
	}
	keys := func(m map[string]bool) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	must.Eq(t, keys(want), keys(got))
}

func TestGenerateDeterministicForSeed(t *testing.T) {
	dir := sharedData(t)
	apps, err := LoadApplications(dir)
	must.NoError(t, err)
	trace, err := workload.ReadPhilly(filepath.Join(dir, "philly-jobs.csv"))
	must.NoError(t, err)
	a, err := Generate(trace, apps, 160, 2, 8, 7)
	must.NoError(t, err)
	b, err := Generate(trace, apps, 160, 2, 8, 7)
	must.NoError(t, err)
	c, err := Generate(trace, apps, 160, 2, 8, 8)
	must.NoError(t, err)
	must.True(t, reflect.DeepEqual(a, b))
	must.False(t, reflect.DeepEqual(a, c))
	must.Eq(t, 160, len(a))
	// What it writes reads back as a valid workload.
	var buf bytes.Buffer
	must.NoError(t, WriteJobs(&buf, a))
	back, err := workload.ParseJobs("gen.csv", &buf, Known(apps))
	must.NoError(t, err)
	must.Eq(t, 160, len(back))
	for i := 1; i < len(back); i++ {
		must.True(t, back[i].Time >= back[i-1].Time)
		must.True(t, back[i].Time < 8*3600)
	}
}
