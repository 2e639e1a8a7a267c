package manager

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/config"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

// packNodes gives the fake Nomad one node with gpus simulated GPUs of 4
// shares each, time-sliced (mps = false), as the device plugin
// fingerprints them: one device group per GPU named by its uuid, share
// IDs "<uuid>-share-<n>".
func packNodes(h *harness, gpus int) {
	var devs []*nomadapi.NodeDeviceResource
	mps := false
	for g := 0; g < gpus; g++ {
		uuid := fmt.Sprintf("GPU-%d", g)
		d := &nomadapi.NodeDeviceResource{Vendor: "caravan", Type: "gpu", Name: uuid, Attributes: map[string]*nomadapi.Attribute{
			"uuid": {StringVal: &uuid}, "mps": {BoolVal: &mps}}}
		for s := 0; s < 4; s++ {
			d.Instances = append(d.Instances, &nomadapi.NodeDevice{ID: fmt.Sprintf("%s-share-%d", uuid, s), Healthy: true})
		}
		devs = append(devs, d)
	}
	h.nomad.SetNodes([]*nomadapi.NodeListStub{{ID: "node-0", Name: "client1", Status: "ready", SchedulingEligibility: "eligible",
		NodeResources: &nomadapi.NodeResources{Devices: devs}}})
}

// onGPU is a running worker allocation of job id holding shares of gpu.
func onGPU(id string, gpu int, shares ...int) *nomadapi.AllocationListStub {
	dev := &nomadapi.AllocatedDeviceResource{Vendor: "caravan", Type: "gpu", Name: fmt.Sprintf("GPU-%d", gpu)}
	for _, s := range shares {
		dev.DeviceIDs = append(dev.DeviceIDs, fmt.Sprintf("GPU-%d-share-%d", gpu, s))
	}
	return &nomadapi.AllocationListStub{ID: id + "-0", Namespace: "default", JobID: id, TaskGroup: "worker", NodeID: "node-0",
		ClientStatus: "running", DesiredStatus: "run",
		AllocatedResources: &nomadapi.AllocatedResources{Tasks: map[string]*nomadapi.AllocatedTaskResources{
			"train": {Devices: []*nomadapi.AllocatedDeviceResource{dev}}}}}
}

// rates adds n progress reports of job id at sps samples/s, a second apart.
func (h *harness) rates(id string, sps float64, n int) {
	for i := 0; i < n; i++ {
		h.clk.Advance(time.Second)
		h.store.Add(ingest.JobKey{Namespace: "default", ID: id}, ingest.Record{Time: h.clk.Now(), AllocationID: id + "-0",
			Sample: ingest.Sample{Step: 10, Loss: 1, SamplesPerSec: sps, Workers: 1}})
	}
}

func packSettings() Settings {
	s := defaultSettings()
	s.Packing = config.DefaultPacking()
	s.Packing.Enabled = true
	return s
}

// packScenario runs job a alone on GPU-0 (measured alone at soloA unless
// 0), then b joins it there (measured alone at soloB first on GPU-1 unless
// 0), and both report their packed rates; it returns the round that judges
// the pair.
type packScenario struct {
	gpus         int
	soloA, soloB float64
	packA, packB float64
	metaA, metaB map[string]string
	disabled     bool
}

func (sc packScenario) run(t *testing.T) (*harness, *Round) {
	t.Helper()
	s := packSettings()
	s.Packing.Enabled = !sc.disabled
	h := newHarness(t, s, 0)
	packNodes(h, sc.gpus)
	meta := map[string]string{"caravan_max_workers": "1"}
	for k, v := range sc.metaA {
		meta[k] = v
	}
	h.nomad.PutJob(gpuJob("a", 1, 2, meta))
	a := onGPU("a", 0, 0, 1)
	h.nomad.SetAllocs([]*nomadapi.AllocationListStub{a})
	h.round()
	if sc.soloA > 0 {
		h.rates("a", sc.soloA, 3)
	}
	metaB := map[string]string{"caravan_max_workers": "1"}
	for k, v := range sc.metaB {
		metaB[k] = v
	}
	h.nomad.PutJob(gpuJob("b", 1, 2, metaB))
	if sc.soloB > 0 {
		h.nomad.SetAllocs([]*nomadapi.AllocationListStub{a, onGPU("b", 1, 0, 1)})
		h.round()
		h.rates("b", sc.soloB, 3)
	}
	h.round() // a measured alone (and b, on GPU-1)
	h.nomad.SetAllocs([]*nomadapi.AllocationListStub{a, onGPU("b", 0, 2, 3)})
	h.round() // the pair is first seen: measurement starts
	h.rates("a", sc.packA, 3)
	h.rates("b", sc.packB, 3)
	return h, h.round()
}

func unpackEvents(h *harness, id string) []nomadapi.ScalingEvent {
	var out []nomadapi.ScalingEvent
	for _, ev := range h.nomad.Events("default", id, "worker") {
		if _, ok := ev.Meta[metaPackGPU]; ok {
			out = append(out, ev)
		}
	}
	return out
}

func constraintsOf(h *harness, id string) []*nomadapi.Constraint {
	return h.nomad.Job("default", id).TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints
}

func gpuView(t *testing.T, r *Round, id string) GPUView {
	t.Helper()
	must.NotNil(t, r.Packing)
	for _, g := range r.Packing.GPUs {
		if g.ID == id {
			return g
		}
	}
	t.Fatalf("no GPU %s in %+v", id, r.Packing.GPUs)
	return GPUView{}
}

// TestManager_UnpacksABadPair: a measured alone at 100/s runs at 45/s once
// b shares its time-sliced GPU (b at 46/s): a is below 0.7 of its solo
// rate, so b, the later placed, is moved off the GPU by one registration
// that adds the constraint ${device.attr.uuid} != GPU-0 at the same count,
// and a count-less scaling event that carries the measured numbers. The
// next round sees the constraint written and writes nothing more.
func TestManager_UnpacksABadPair(t *testing.T) {
	h, r := packScenario{gpus: 2, soloA: 100, packA: 45, packB: 46}.run(t)
	var un *Action
	for i := range r.Actions {
		if r.Actions[i].Unpack != nil {
			un = &r.Actions[i]
		}
	}
	must.NotNil(t, un, must.Sprintf("actions: %+v", r.Actions))
	must.Eq(t, "default/b", un.Job)
	must.Eq(t, KindUnpack, un.Kind)
	must.Eq(t, StatusApplied, un.Status, must.Sprint(un.Error))
	must.Eq(t, 1, un.To)
	must.StrContains(t, un.Message, "unpack from GPU GPU-0 (migrated off the GPU by a device constraint")
	must.StrContains(t, un.Message, "default/a 0.45 (45 of 100/s solo)")

	cs := constraintsOf(h, "b")
	must.SliceLen(t, 1, cs)
	must.Eq(t, nomadapi.Constraint{LTarget: "${device.attr.uuid}", Operand: "!=", RTarget: "GPU-0"}, *cs[0])
	must.Eq(t, 1, count(t, h.nomad, "b"))
	must.SliceEmpty(t, constraintsOf(h, "a"))

	evs := unpackEvents(h, "b")
	must.SliceLen(t, 1, evs)
	must.Nil(t, evs[0].Count)
	n, ok := submit.EventCount(&evs[0])
	must.True(t, ok)
	must.Eq(t, int64(1), n)
	must.Eq[any](t, ActionUnpack, evs[0].Meta[submit.EventMetaAction])
	must.Eq[any](t, "GPU-0", evs[0].Meta[metaPackGPU])
	must.Eq[any](t, "default/a", evs[0].Meta[metaPackNeighbours])
	must.Eq[any](t, "time-sliced", evs[0].Meta[metaPackMode])
	must.Eq[any](t, "46", evs[0].Meta[metaPackPacked])
	must.Eq[any](t, "default/a 45 of 100/s solo", evs[0].Meta[metaPackMeasured])

	g := gpuView(t, r, "GPU-0")
	must.SliceLen(t, 2, g.Jobs)
	must.Eq(t, 4, g.Used)
	must.NotNil(t, g.Last)
	must.Eq(t, PackApplied, g.Last.Status)
	must.Eq(t, "default/b", g.Last.Job)
	a := findJob(t, r, "a")
	must.NotNil(t, a.Packing)
	must.Eq(t, []string{"default/b"}, a.Packing.Neighbours)
	must.Eq(t, 100.0, *a.Packing.Solo)
	must.Eq(t, 45.0, *a.Packing.Packed)
	_, err := json.Marshal(r)
	must.NoError(t, err)

	// Nomad has not moved b yet: the constraint is there, nothing more is
	// written.
	writes := len(h.nomad.WritesSnapshot())
	r = h.round()
	must.Eq(t, writes, len(h.nomad.WritesSnapshot()))
	must.Eq(t, PackWaiting, gpuView(t, r, "GPU-0").Last.Status)

	// b lands on GPU-1: both are alone again; a's pairing is in its history.
	h.nomad.SetAllocs([]*nomadapi.AllocationListStub{onGPU("a", 0, 0, 1), onGPU("b", 1, 0, 1)})
	r = h.round()
	a = findJob(t, r, "a")
	must.SliceEmpty(t, a.Packing.Neighbours)
	must.Eq(t, 1, a.Packing.HistoryN)
	must.Eq(t, 0.45, *a.Packing.History)
	b := findJob(t, r, "b")
	must.Eq(t, []string{"default/a"}, b.Packing.Avoid)
}

// TestManager_UnpackSuspendsWithoutAFreeGPU: on a node with one GPU the
// later placed job of a losing pair is suspended: one registration at 0
// workers with the constraint (so that it resumes elsewhere), recorded as
// a suspension, and the next round classes it suspended.
func TestManager_UnpackSuspendsWithoutAFreeGPU(t *testing.T) {
	h, r := packScenario{gpus: 1, soloA: 100, packA: 45, packB: 46}.run(t)
	var un *Action
	for i := range r.Actions {
		if r.Actions[i].Unpack != nil {
			un = &r.Actions[i]
		}
	}
	must.NotNil(t, un)
	must.Eq(t, KindSuspend, un.Kind)
	must.Eq(t, StatusApplied, un.Status, must.Sprint(un.Error))
	must.Eq(t, 0, count(t, h.nomad, "b"))
	must.SliceLen(t, 1, constraintsOf(h, "b"))
	evs := unpackEvents(h, "b")
	must.SliceLen(t, 1, evs)
	must.Eq[any](t, submit.ActionSuspend, evs[0].Meta[submit.EventMetaAction])
	h.nomad.SetAllocs([]*nomadapi.AllocationListStub{onGPU("a", 0, 0, 1)})
	must.Eq(t, StateSuspended, findJob(t, h.round(), "b").State)
}

// TestManager_PackingKeeps: pairs that must stay packed, with nothing
// written: a good pair (both near their solo rates), a pair never measured
// alone (not unpacked on a guess), and a losing pair while packing is off
// (shown only).
func TestManager_PackingKeeps(t *testing.T) {
	cases := []struct {
		name     string
		sc       packScenario
		judgment string
		gain     bool
		last     string
	}{
		{"good pair", packScenario{gpus: 2, soloA: 100, soloB: 100, packA: 95, packB: 96},
			"keep GPU GPU-0 (time-sliced) packed: measured combined gain 1.91 >= 1.00", true, ""},
		{"unmeasured alone", packScenario{gpus: 2, packA: 10, packB: 10},
			"not measured packed and alone yet, not unpacked on a guess", false, ""},
		{"packing off", packScenario{gpus: 2, soloA: 100, packA: 45, packB: 46, disabled: true},
			"unpack default/b from GPU GPU-0", false, PackShown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, r := tc.sc.run(t)
			for _, id := range []string{"a", "b"} {
				must.SliceEmpty(t, unpackEvents(h, id))
				must.SliceEmpty(t, constraintsOf(h, id))
			}
			for _, a := range r.Actions {
				must.Nil(t, a.Unpack)
			}
			g := gpuView(t, r, "GPU-0")
			must.StrContains(t, g.Judgement, tc.judgment)
			must.Eq(t, tc.gain, g.Gain != nil)
			if tc.last != "" {
				must.Eq(t, tc.last, g.Last.Status)
			}
		})
	}
}

// TestManager_PackNeverIsHonoured: b opts out (caravan_pack = "never"):
// a losing pair is unpacked by moving a, never b, though b came later.
func TestManager_PackNeverIsHonoured(t *testing.T) {
	h, r := packScenario{gpus: 2, soloA: 100, soloB: 100, packA: 45, packB: 46, metaB: map[string]string{"caravan_pack": "never"}}.run(t)
	must.SliceEmpty(t, unpackEvents(h, "b"))
	must.SliceEmpty(t, constraintsOf(h, "b"))
	must.SliceLen(t, 1, unpackEvents(h, "a"))
	must.SliceLen(t, 1, constraintsOf(h, "a"))
	g := gpuView(t, r, "GPU-0")
	must.Eq(t, "default/a", g.Last.Job)
	var never GPUJob
	for _, j := range g.Jobs {
		if j.Job == "default/b" {
			never = j
		}
	}
	must.True(t, never.Never)

	// Both opted out: neither is moved, and the page says why.
	never2 := map[string]string{"caravan_pack": "never"}
	h, r = packScenario{gpus: 2, soloA: 100, soloB: 100, packA: 45, packB: 46, metaA: never2, metaB: never2}.run(t)
	must.SliceEmpty(t, unpackEvents(h, "a"))
	must.SliceEmpty(t, unpackEvents(h, "b"))
	g = gpuView(t, r, "GPU-0")
	must.Eq(t, PackSkipped, g.Last.Status)
	must.StrContains(t, g.Last.Reason, `not moved: caravan_pack = "never"`)
}

// TestManager_PackingBoundsALyingRate: b claims a packed throughput far
// above its solo rate. Its ratio is capped at 1.1, so the combined gain
// (0.45 + 1.1) clears 1.0, yet a, measured at 0.45 of its solo rate, still
// unpacks the pair; a rate beyond the ingestion bound counts as
// unmeasured, and a's loss alone unpacks it.
func TestManager_PackingBoundsALyingRate(t *testing.T) {
	for _, lie := range []float64{400, 1e12} {
		t.Run(fmt.Sprint(lie), func(t *testing.T) {
			h, r := packScenario{gpus: 2, soloA: 100, soloB: 100, packA: 45, packB: lie}.run(t)
			must.SliceLen(t, 1, unpackEvents(h, "b"))
			g := gpuView(t, r, "GPU-0")
			for _, j := range g.Jobs {
				if j.Job == "default/b" && lie < 1e9 {
					must.Eq(t, 1.1, *j.Ratio)
				}
				if j.Job == "default/b" && lie >= 1e9 {
					must.Nil(t, j.Ratio)
				}
			}
			must.StrContains(t, g.Last.Reason, "default/a below 0.70 of solo rate")
		})
	}
}
