package philly

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/shoenig/test/must"
)

func TestReplayPhillySmall(t *testing.T) {
	tmp := t.TempDir()
	path := filepath.Join(tmp, "philly.csv")
	var b strings.Builder
	b.WriteString("timestamp,duration,num_gpus,gpu_time,cluster\n")
	b.WriteString("2017-10-09 07:00:00,600,1,600,a\n2017-10-09 07:00:30,3600,4,14400,a\n2017-10-09 07:01:00,1200,8,9600,a\n2017-10-09 09:00:00,60,2,120,a\n")
	must.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	for _, p := range []string{"fifo", "tiresias", "optimus", "goodput"} {
		rep, err := ReplayPhilly(engine.Config{Nodes: 2, GPUsPerNode: 4}, p, path)
		must.NoError(t, err, must.Sprintf("%s", p))
		must.Eq(t, 4, rep.Jobs)
		must.True(t, rep.AvgJCT >= 60, must.Sprintf("%s avg %v", p, rep.AvgJCT))
	}
	_, err := ReplayPhilly(engine.Config{Nodes: 1, GPUsPerNode: 4}, "fifo", path)
	must.ErrorContains(t, err, "asks 8 GPUs")
}
