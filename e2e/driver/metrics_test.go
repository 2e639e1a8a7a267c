package driver

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/shoenig/test/must"
)

// checkDriverMetrics scrapes the driver's metrics_address on the client
// that took a stop checkpoint: the counter, the commit-duration histogram
// and the size histogram must have counted it, outliving the task events.
func checkDriverMetrics(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url)
	must.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must.NoError(t, err)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	must.NoError(t, err, must.Sprint(string(b)))

	saved := 0.0
	for _, m := range fams["caravan_driver_checkpoints_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["reason"] == "stop" && labels["outcome"] == "saved" {
			saved = m.GetCounter().GetValue()
		}
	}
	must.GreaterEq(t, 1.0, saved, must.Sprint(string(b)))
	for _, name := range []string{"caravan_driver_checkpoint_commit_duration_seconds", "caravan_driver_checkpoint_size_bytes"} {
		f, ok := fams[name]
		must.True(t, ok, must.Sprintf("no %s at %s", name, url))
		must.Positive(t, f.GetMetric()[0].GetHistogram().GetSampleCount())
	}
	_, ok := fams["caravan_build_info"]
	must.True(t, ok)
}
