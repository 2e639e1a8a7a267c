package ui

import (
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/rightsize"
	"github.com/caravan-nomad/caravan/planner/service/manager"
)

// TestJobPage_ShowsRightsize: the job page shows the recommendation with
// its evidence, and says when there is none yet.
func TestJobPage_ShowsRightsize(t *testing.T) {
	s, _ := fixture(t, "")
	job := &s.Planner.(*fakePlanner).round.Jobs[0]
	job.Rightsize = &rightsize.Recommendation{CurrentShares: 4, Shares: 1, Enough: true, Reason: "peak " + evil,
		Evidence: rightsize.Evidence{Reports: 6, MemorySamples: 4, PeakBytes: 9 << 30, MemoryPerShareBytes: 10 << 30,
			MemoryShares: 1, ThroughputShares: 1, PerWorker: map[int]float64{4: 100}}}
	b := body(t, get(t, s.Handler(), JobPath("default", evil), nil))
	must.StrContains(t, b, `id="rightsize" data-shares="1" data-enough="true"`)
	must.StrContains(t, b, "recommended <b>1</b>")
	must.StrContains(t, b, "9216 MiB")
	must.StrContains(t, b, "10240 MiB")
	must.StrContains(t, b, "throughput per worker at 4 shares")
	must.StrNotContains(t, b, "<script>")

	job.Rightsize = &rightsize.Recommendation{CurrentShares: 4, Reason: "not enough evidence at 4 shares"}
	b = body(t, get(t, s.Handler(), JobPath("default", evil), nil))
	must.StrContains(t, b, "no recommendation yet")
	must.StrContains(t, b, "not enough evidence at 4 shares")
	must.StrNotContains(t, b, `id="resize"`)

	job.Resize = &manager.Resize{Cause: manager.CauseGPUOOM, From: 1, To: 2, Status: manager.ResizeWaiting, Reason: "queue " + evil}
	b = body(t, get(t, s.Handler(), JobPath("default", evil), nil))
	must.StrContains(t, b, `id="resize" data-status="waiting" data-to="2"`)
	must.StrContains(t, b, "Resize (gpu-out-of-memory): <b>1</b> &rarr; <b>2</b>")
	must.StrNotContains(t, b, "<script>")
}

// TestClusterPage_ShowsMemoryPeak: the cluster page shows the device
// plugin's memory_peak of a share's holder.
func TestClusterPage_ShowsMemoryPeak(t *testing.T) {
	s, nm := fixture(t, "")
	attrs := nm.stats["alloc-1"].Tasks["trainer"].ResourceUsage.DeviceStats[0].InstanceStats["GPU-a-share-0"].Stats.Attributes
	attrs["memory_peak"] = &nomadapi.StatValue{IntNumeratorVal: i64(7168), IntDenominatorVal: i64(20480)}
	b := body(t, get(t, s.Handler(), "/ui/cluster", nil))
	must.StrContains(t, b, "peak 7168")
}
