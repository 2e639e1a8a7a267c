package elastic_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// benchVariant is one way to run the elastic trainer: as containers under
// Nomad's docker driver against dockerd (client1) or podman (client2), or
// as host processes under the caravan driver (client1).
type benchVariant struct {
	name, spec, client string
	vars               []string
	// saveTask and restoreTask are the tasks whose events time the
	// driver's commit and restore.
	saveTask, restoreTask string
}

// elasticTimes are one run's measurements.
type elasticTimes struct {
	scale, suspend, resume time.Duration // wall clock, polled every 250 ms
	commit, restore        time.Duration // the driver's own share (event annotations)
}

// BenchmarkContainers_Elastic measures, on one client at a time (the other
// ineligible), in the same run and alternating: the time from `nomad job
// scale worker 2` to the coordinator's first step with the new worker, and
// a suspend/resume cycle (both groups to 0, then to 1) with the driver's own
// share of it (its commit and restore durations), for the container job
// (jobspecs/train-elastic.nomad.hcl, driver=docker) on client1 (dockerd) and on
// client2 (podman), and the host-process job
// (jobspecs/train-elastic.nomad.hcl) on client1. Times are polled from the
// logs every 250 ms. Compute is MODELLED (1 ms per sample). Not run by bench-smoke
// (-short): it needs the e2e cluster and a few minutes.
//
//	CARAVAN_E2E=1 go test -p 1 -run '^$' -bench BenchmarkContainers_Elastic -benchtime 3x ./e2e/containers
func BenchmarkContainers_Elastic(b *testing.B) {
	if testing.Short() {
		b.Skip("e2e benchmark: needs the local cluster and minutes")
	}
	c := harness.Cluster(b)
	c.LoadImages(b)
	for _, rt := range harness.ContainerRuntimes {
		c.RequireRuntime(b, rt.Client, rt.Name)
	}
	b.Cleanup(func() {
		c.Eligible(b, "client1", true)
		c.Eligible(b, "client2", true)
	})
	common := []string{"workers=1", "ps=1", "steps=1000000", "compute_per_sample=1ms", `trainer_args=["-log-every","1"]`}
	variants := []benchVariant{
		{"docker", "jobspecs/train-elastic.nomad.hcl", "client1", append([]string{"driver=docker"}, common...), "commit", "restore"},
		{"podman", "jobspecs/train-elastic.nomad.hcl", "client2", append([]string{"driver=docker"}, common...), "commit", "restore"},
		{"host", "jobspecs/train-elastic.nomad.hcl", "client1",
			append([]string{"caravan_bin=" + c.Bin, "checkpoint_interval="}, common...), "ps", "ps"},
	}
	sums := map[string]*elasticTimes{}
	for _, v := range variants {
		sums[v.name] = &elasticTimes{}
	}
	for i := 0; i < b.N; i++ {
		for _, v := range variants {
			c.Eligible(b, "client1", v.client == "client1")
			c.Eligible(b, "client2", v.client == "client2")
			r := measureElastic(b, c, v, fmt.Sprintf("bench-elastic-%s-%d", v.name, i))
			b.Logf("%s run %d: scale to first step %s; suspend %s, resume %s; driver commit %s, restore %s",
				v.name, i, r.scale, r.suspend, r.resume, r.commit, r.restore)
			s := sums[v.name]
			s.scale += r.scale
			s.suspend += r.suspend
			s.resume += r.resume
			s.commit += r.commit
			s.restore += r.restore
		}
	}
	for name, s := range sums {
		n := float64(b.N)
		b.ReportMetric(s.scale.Seconds()/n, name+"-scale-s")
		b.ReportMetric(s.suspend.Seconds()/n, name+"-suspend-s")
		b.ReportMetric(s.resume.Seconds()/n, name+"-resume-s")
		b.ReportMetric(float64(s.commit.Microseconds())/1000/n, name+"-commit-ms")
		b.ReportMetric(float64(s.restore.Microseconds())/1000/n, name+"-restore-ms")
	}
}

func measureElastic(b *testing.B, c *harness.C, v benchVariant, id string) elasticTimes {
	b.Helper()
	var r elasticTimes
	_ = os.RemoveAll(filepath.Join(c.CheckpointDir, "default", id))
	c.RunJob(b, v.spec, append([]string{"name=" + id}, v.vars...)...)
	j := &harness.Elastic{T: b, C: c, ID: id}
	co := j.Coordinator(nil)
	j.WaitShape(co, 1, 1)

	t0 := time.Now()
	j.Scale("worker", 2)
	j.WaitShape(co, 2, 1)
	r.scale = time.Since(t0)

	t0 = time.Now()
	j.Scale("worker", 0)
	j.Scale("ps", 0)
	j.AllStopped()
	r.suspend = time.Since(t0)
	r.commit = eventDuration(b, c, co, v.saveTask, "Checkpoint saved")

	t0 = time.Now()
	j.Scale("ps", 1)
	j.Scale("worker", 1)
	co2 := j.Coordinator(map[string]bool{co: true})
	j.WaitLog(co2, "resumed", func(log string) bool { return strings.Contains(log, "resumed step=") })
	r.resume = time.Since(t0)
	r.restore = eventDuration(b, c, co2, v.restoreTask, "Checkpoint restored")
	c.StopJob(b, id)
	return r
}

// eventDuration is the duration annotation of the task's event containing
// substr.
func eventDuration(b *testing.B, c *harness.C, alloc, task, substr string) time.Duration {
	b.Helper()
	var d time.Duration
	harness.Eventually(b, time.Minute, func() error {
		for _, e := range c.TaskEvents(b, alloc, task) {
			if strings.Contains(e.DisplayMessage, substr) {
				var err error
				d, err = time.ParseDuration(e.Details["duration"])
				return err
			}
		}
		return fmt.Errorf("no %q event of %s on %s yet", substr, task, alloc)
	})
	return d
}
