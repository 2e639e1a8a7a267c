package driver

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/helper/testlog"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/store"
)

// checkCheckpointMetrics checks the metrics after two stop checkpoints, a
// fresh start and two restores (TestDriver_StopCheckpointsAndResumeIsBitForBit).
func checkCheckpointMetrics(t *testing.T, m *driverMetrics) {
	t.Helper()
	must.Eq(t, 2.0, testutil.ToFloat64(m.commits.WithLabelValues(reasonStop, outcomeSaved)))
	must.Eq(t, 1.0, testutil.ToFloat64(m.restores.WithLabelValues(outcomeFresh)))
	must.Eq(t, 2.0, testutil.ToFloat64(m.restores.WithLabelValues(outcomeRestored)))
	must.Eq(t, 1, testutil.CollectAndCount(m.commitSeconds, "caravan_driver_checkpoint_commit_duration_seconds"))
	must.Positive(t, testutil.ToFloat64(m.newBytes))
	problems, err := testutil.GatherAndLint(m.reg)
	must.NoError(t, err)
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "caravan_") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
}

func TestDriver_ServesMetricsAtMetricsAddress(t *testing.T) {
	d := NewDriver(context.Background(), testlog.HCLogger(t))
	d.metrics.saved(reasonPeriodic, store.CommitStats{Bytes: 1 << 20, NewBytes: 4096, Duration: 30 * time.Millisecond}, 0)
	d.metrics.outcome(reasonStop, outcomeFailed)
	must.NoError(t, d.serveMetrics("127.0.0.1:0"))
	t.Cleanup(func() { must.NoError(t, d.serveMetrics("")) })
	resp, err := http.Get("http://" + d.metricsServer.Addr() + "/metrics")
	must.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must.NoError(t, err)
	body := string(b)
	for _, want := range []string{
		`caravan_driver_checkpoints_total{outcome="saved",reason="periodic"} 1`,
		`caravan_driver_checkpoints_total{outcome="failed",reason="stop"} 1`,
		`caravan_driver_checkpoint_size_bytes_sum 1.048576e+06`,
		`# TYPE caravan_driver_checkpoint_commit_duration_seconds histogram`,
		`caravan_build_info{`,
		`go_goroutines`,
	} {
		must.StrContains(t, body, want)
	}
}
