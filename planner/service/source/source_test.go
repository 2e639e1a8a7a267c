package source

import (
	"context"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/planner/service/clock"
	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
)

func TestParseSpec(t *testing.T) {
	cases := []struct {
		name  string
		meta  map[string]string
		err   string
		check func(*testing.T, Spec)
	}{
		{"defaults", nil, "", func(t *testing.T, s Spec) {
			must.Eq(t, "worker", s.WorkerGroup)
			must.Eq(t, 1, s.MinWorkers)
			must.Eq(t, 8, s.MaxWorkers)
			must.True(t, s.Suspendable)
			must.Eq(t, "allreduce", s.SpeedModel)
		}},
		{"all keys", map[string]string{MetaMinWorkers: "2", MetaMaxWorkers: "6", MetaGang: "true", MetaTargetLoss: "0.25",
			MetaStopOnConverge: "true", MetaPriority: "90", MetaSuspendable: "false", MetaGPUShares: "3", MetaSpeedModel: "ps-async",
			MetaResizeCost: "2.5s"},
			"", func(t *testing.T, s Spec) {
				must.Eq(t, 2, s.MinWorkers)
				must.Eq(t, 6, s.MaxWorkers)
				must.True(t, s.Gang)
				must.Eq(t, 0.25, s.TargetLoss)
				must.Eq(t, 90, s.Priority)
				must.False(t, s.Suspendable)
				must.Eq(t, 3, s.GPUShares)
				must.Eq(t, "ps-async", s.SpeedModel)
				must.Eq(t, 2.5, s.ResizeCostSeconds)
			}},
		{"bad number", map[string]string{MetaMaxWorkers: "lots"}, MetaMaxWorkers, nil},
		{"min above max", map[string]string{MetaMinWorkers: "5", MetaMaxWorkers: "2"}, MetaMinWorkers, nil},
		{"bad bool", map[string]string{MetaGang: "maybe"}, MetaGang, nil},
		{"negative loss", map[string]string{MetaTargetLoss: "-1"}, MetaTargetLoss, nil},
		{"unknown group", map[string]string{MetaWorkerGroup: "trainers"}, MetaWorkerGroup, nil},
		{"unknown speed model", map[string]string{MetaSpeedModel: "magic"}, MetaSpeedModel, nil},
		{"priority range", map[string]string{MetaPriority: "101"}, MetaPriority, nil},
		{"resize cost without unit", map[string]string{MetaResizeCost: "2"}, MetaResizeCost, nil},
		{"negative resize cost", map[string]string{MetaResizeCost: "-1s"}, MetaResizeCost, nil},
		{"right-sizing defaults", nil, "", func(t *testing.T, s Spec) {
			must.Eq(t, RightsizeRecommend, s.Rightsize)
			must.False(t, s.RightsizeSet)
			must.Eq(t, PackAuto, s.Pack)
			must.Eq(t, 0, s.MinGPUShares)
			must.Eq(t, 0, s.MaxGPUShares)
		}},
		{"right-sizing keys", map[string]string{MetaMinGPUShares: "2", MetaMaxGPUShares: "3", MetaRightsize: "recommend", MetaPack: "never"},
			"", func(t *testing.T, s Spec) {
				must.Eq(t, 2, s.MinGPUShares)
				must.Eq(t, 3, s.MaxGPUShares)
				must.Eq(t, PackNever, s.Pack)
				must.SliceEmpty(t, s.Warnings)
			}},
		{"zero min gpu shares", map[string]string{MetaMinGPUShares: "0"}, MetaMinGPUShares, nil},
		{"bad max gpu shares", map[string]string{MetaMaxGPUShares: "two"}, MetaMaxGPUShares, nil},
		{"min gpu shares above max", map[string]string{MetaMinGPUShares: "4", MetaMaxGPUShares: "2"}, MetaMinGPUShares, nil},
		{"rightsize apply", map[string]string{MetaRightsize: " apply"}, "", func(t *testing.T, s Spec) {
			must.Eq(t, RightsizeApply, s.Rightsize)
			must.True(t, s.RightsizeSet)
		}},
		{"bad rightsize", map[string]string{MetaRightsize: "always"}, MetaRightsize, nil},
		{"bad pack", map[string]string{MetaPack: "sometimes"}, MetaPack, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := fakenomad.TrainingJob("a", 1, tc.meta)
			s, err := ParseSpec(job)
			if tc.err != "" {
				must.ErrorIs(t, err, ErrBadMeta)
				must.ErrorContains(t, err, tc.err)
				return
			}
			must.NoError(t, err)
			tc.check(t, s)
		})
	}
}

func TestEnabled(t *testing.T) {
	must.True(t, Enabled(map[string]string{MetaEnabled: "true"}))
	must.True(t, Enabled(map[string]string{MetaEnabled: " Enabled "}))
	must.False(t, Enabled(map[string]string{MetaEnabled: "no"}))
	must.False(t, Enabled(nil))
}

func TestNodeCapacity(t *testing.T) {
	dev := func(name string, healthy ...bool) *nomadapi.NodeDeviceResource {
		d := &nomadapi.NodeDeviceResource{Vendor: "caravan", Type: "gpushare", Name: name}
		for _, h := range healthy {
			d.Instances = append(d.Instances, &nomadapi.NodeDevice{Healthy: h})
		}
		return d
	}
	stub := &nomadapi.NodeListStub{ID: "n", Status: "ready", SchedulingEligibility: "eligible",
		NodeResources: &nomadapi.NodeResources{Devices: []*nomadapi.NodeDeviceResource{
			dev("GPU-1", true, true, true, true), dev("GPU-2", true, false, true, true),
			{Vendor: "nvidia", Type: "gpu", Name: "A100", Instances: []*nomadapi.NodeDevice{{Healthy: true}}},
		}}}
	n := nodeFromStub(stub, "caravan/gpushare")
	must.Eq(t, Node{ID: "n", Ready: true, Shares: 4, GPUs: 1, SharesPerGPU: 4, GPUList: []GPU{
		{ID: "GPU-1", Shares: 4, Healthy: true, Instances: []string{"", "", "", ""}},
		{ID: "GPU-2", Shares: 4, Instances: []string{"", "", "", ""}},
	}}, n)
	must.Eq(t, 2, nodeFromStub(stub, "gpushare").GPUs+nodeFromStub(stub, "gpu").GPUs)
	stub.Drain = true
	must.False(t, nodeFromStub(stub, "caravan/gpushare").Ready)

	// Live packing reads each GPU's uuid and mps attributes.
	uuid, mps := "GPU-aaaa", true
	stub.NodeResources.Devices[0].Attributes = map[string]*nomadapi.Attribute{"uuid": {StringVal: &uuid}, "mps": {BoolVal: &mps}}
	g := nodeFromStub(stub, "caravan/gpushare").GPUList[0]
	must.Eq(t, "GPU-aaaa", g.ID)
	must.True(t, g.MPS)
}

// TestNodeMemoryPerShare reads the least memory_per_share of a node's
// healthy GPUs (a GPU with an unhealthy share is not counted).
func TestNodeMemoryPerShare(t *testing.T) {
	mib := func(v int64, unit string) *nomadapi.Attribute { return &nomadapi.Attribute{IntVal: &v, Unit: unit} }
	dev := func(name string, a *nomadapi.Attribute, healthy bool) *nomadapi.NodeDeviceResource {
		return &nomadapi.NodeDeviceResource{Vendor: "caravan", Type: "gpushare", Name: name,
			Attributes: map[string]*nomadapi.Attribute{attrMemoryPerShare: a},
			Instances:  []*nomadapi.NodeDevice{{Healthy: healthy}, {Healthy: true}}}
	}
	stub := &nomadapi.NodeListStub{ID: "n", Status: "ready", SchedulingEligibility: "eligible",
		NodeResources: &nomadapi.NodeResources{Devices: []*nomadapi.NodeDeviceResource{
			dev("GPU-1", mib(20480, "MiB"), true), dev("GPU-2", mib(10240, "MiB"), true),
			dev("GPU-3", mib(1024, "MiB"), false), dev("GPU-4", mib(-5, "MiB"), true),
		}}}
	must.Eq(t, int64(10240), nodeFromStub(stub, "caravan/gpushare").MemoryPerShareMiB)
}

func TestSource_WatchesAndRecoversFromOutages(t *testing.T) {
	n := fakenomad.New()
	defer n.Close()
	n.SetNodes([]*nomadapi.NodeListStub{{ID: "n1", Status: "ready", SchedulingEligibility: "eligible"}})
	n.PutJob(fakenomad.TrainingJob("a", 1, nil))
	n.PutJob(fakenomad.TrainingJob("plain", 1, map[string]string{MetaEnabled: "false"}))
	n.PutJob(fakenomad.TrainingJob("bad", 1, map[string]string{MetaMaxWorkers: "x"}))
	s := New(Config{Client: n.Client(), Clock: clock.Real{}, Wait: 100 * time.Millisecond,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	until := func(f func(Snapshot) bool) {
		t.Helper()
		must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool { return f(s.Snapshot()) }),
			wait.Timeout(5*time.Second), wait.Gap(5*time.Millisecond)))
	}
	until(func(snap Snapshot) bool { return snap.Synced && len(snap.Jobs) == 2 })
	snap := s.Snapshot()
	must.NoError(t, snap.Jobs[JobKey{"default", "a"}].SpecErr)
	must.ErrorIs(t, snap.Jobs[JobKey{"default", "bad"}].SpecErr, ErrBadMeta)
	_, managed := snap.Jobs[JobKey{"default", "plain"}]
	must.False(t, managed)

	// Nomad goes away: the error shows, the last view stays.
	n.SetDown(true)
	until(func(snap Snapshot) bool { return snap.Err != nil })
	must.MapLen(t, 2, s.Snapshot().Jobs)
	n.SetDown(false)
	n.PutJob(fakenomad.TrainingJob("c", 2, nil))
	until(func(snap Snapshot) bool { return snap.Err == nil && len(snap.Jobs) == 3 })

	// Blocking queries: an idle source makes few requests.
	before := n.RequestCount("GET /v1/jobs")
	time.Sleep(300 * time.Millisecond) // idle on purpose: counting long-polls over a fixed span
	must.Less(t, before+10, n.RequestCount("GET /v1/jobs"))
}
