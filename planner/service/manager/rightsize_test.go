package manager

import (
	"encoding/json"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/rightsize"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
)

// gpuNodes gives the harness n nodes with one 40 GiB GPU in 4 shares of
// 10 GiB (the device plugin's memory_per_share attribute).
func gpuNodes(h *harness, n int) {
	per := int64(10240)
	var stubs []*nomadapi.NodeListStub
	for i := 0; i < n; i++ {
		dev := &nomadapi.NodeDeviceResource{Vendor: "caravan", Type: "gpu", Name: "GPU-x",
			Attributes: map[string]*nomadapi.Attribute{"memory_per_share": {IntVal: &per, Unit: "MiB"}}}
		for s := 0; s < 4; s++ {
			dev.Instances = append(dev.Instances, &nomadapi.NodeDevice{ID: "s", Healthy: true})
		}
		stubs = append(stubs, &nomadapi.NodeListStub{ID: string(rune('a' + i)), Status: "ready", SchedulingEligibility: "eligible",
			NodeResources: &nomadapi.NodeResources{Devices: []*nomadapi.NodeDeviceResource{dev}}})
	}
	h.nomad.SetNodes(stubs)
}

func (h *harness) report(id string, peak int64) {
	h.store.Add(ingest.JobKey{Namespace: "default", ID: id}, ingest.Record{Time: h.clk.Now(),
		Sample: ingest.Sample{Step: 10, Loss: 1, SamplesPerSec: 100, Workers: 1, GPUMemoryPeakBytes: peak}})
}

// TestManager_RecommendsSharesFromEvidence: a job whose workers hold 4
// shares and use 1 share's memory at flat throughput is recommended 1 share
// once it sent enough reports, none before, and its evidence starts afresh
// when its share count changes. The recommendation is shown in the job's
// JSON and nothing is written to Nomad.
func TestManager_RecommendsSharesFromEvidence(t *testing.T) {
	h := newHarness(t, defaultSettings(), 0)
	gpuNodes(h, 1)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_gpu_shares": "4", "caravan_max_workers": "1"}))
	peak := int64(8) << 30
	for i := 0; i < rightsize.MinReports-1; i++ {
		h.report("a", peak)
	}
	v := findJob(t, h.round(), "a")
	must.NotNil(t, v.Rightsize)
	must.False(t, v.Rightsize.Enough, must.Sprint(v.Rightsize.Reason))
	must.Eq(t, 0, v.Rightsize.Shares)

	h.report("a", peak)
	v = findJob(t, h.round(), "a")
	must.True(t, v.Rightsize.Enough, must.Sprint(v.Rightsize.Reason))
	must.Eq(t, 1, v.Rightsize.Shares)
	must.Eq(t, 4, v.Rightsize.CurrentShares)
	must.Eq(t, peak, v.Rightsize.Evidence.PeakBytes)
	must.Eq(t, int64(10)<<30, v.Rightsize.Evidence.MemoryPerShareBytes)
	raw, err := json.Marshal(v)
	must.NoError(t, err)
	must.StrContains(t, string(raw), `"rightsize":{"current_shares":4,"shares":1,"enough_evidence":true`)
	must.SliceEmpty(t, h.nomad.WritesSnapshot())

	// The user re-registers the job at 2 shares: the reports at 4 no
	// longer count.
	h.clk.Advance(time.Second)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_gpu_shares": "2", "caravan_max_workers": "1"}))
	v = findJob(t, h.round(), "a")
	must.False(t, v.Rightsize.Enough)
	must.Eq(t, 2, v.Rightsize.CurrentShares)
	must.StrContains(t, v.Rightsize.Reason, "0 of 5 progress reports")
}
