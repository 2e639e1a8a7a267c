//go:build linux

package device

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/hashicorp/nomad/plugins/device"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"
)

// nextFingerprint reads one fingerprint or fails after a timeout.
func nextFingerprint(t *testing.T, ch <-chan *device.FingerprintResponse) *device.FingerprintResponse {
	t.Helper()
	select {
	case f, ok := <-ch:
		must.True(t, ok, must.Sprint("fingerprint channel closed"))
		must.NoError(t, f.Error)
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no fingerprint within 10s")
	}
	return nil
}

func groupByName(groups []*device.DeviceGroup) map[string]*device.DeviceGroup {
	m := map[string]*device.DeviceGroup{}
	for _, g := range groups {
		m[g.Name] = g
	}
	return m
}

func TestFingerprint_DGXH100(t *testing.T) {
	f := newFakeGPUs(t)
	p := newTestPlugin(t, `config {}`, f.srv, nil)
	ch, err := p.Fingerprint(t.Context())
	must.NoError(t, err)
	fp := nextFingerprint(t, ch)
	must.Len(t, 8, fp.Devices)
	for i, g := range fp.Devices {
		must.NoError(t, g.Validate())
		must.Eq(t, Vendor, g.Vendor)
		must.Eq(t, DeviceType, g.Type)
		must.Eq(t, f.uuid(i), g.Name, must.Sprint("groups are ordered by GPU index"))
		must.Len(t, 4, g.Devices)
		for j, d := range g.Devices {
			must.Eq(t, fmt.Sprintf("%s-share-%d", f.uuid(i), j), d.ID)
			must.True(t, d.Healthy)
			must.Eq(t, fmt.Sprintf("0000:%02x:00.0", i), d.HwLocality.PciBusID)
		}
		a := g.Attributes
		must.Eq(t, "NVIDIA H100 80GB HBM3", *a[AttrModel].String)
		must.Eq(t, f.uuid(i), *a[AttrUUID].String)
		must.Eq(t, int64(i), *a[AttrIndex].Int)
		must.Eq(t, int64(81920), *a[AttrMemory].Int)
		must.Eq(t, "MiB", a[AttrMemory].Unit)
		must.Eq(t, int64(20480), *a[AttrMemoryPerShare].Int)
		must.Eq(t, int64(4), *a[AttrShares].Int)
		must.Eq(t, 0.25, *a[AttrShareFraction].Float)
		must.Eq(t, "nvml", *a[AttrBackend].String)
		must.False(t, *a[AttrSimulated].Bool)
		must.Eq(t, "550.54.15", *a[AttrDriverVersion].String)
		must.Eq(t, "12.4", *a[AttrCUDADriverVersion].String)
		must.Eq(t, "9.0", *a[AttrComputeCapability].String)
		must.False(t, *a[AttrMIG].Bool)
	}
}

func TestFingerprint_SendsOnlyChanges(t *testing.T) {
	f := newFakeGPUs(t)
	p := newTestPlugin(t, `config { fingerprint_period = "20ms" }`, f.srv, nil)
	ch, err := p.Fingerprint(t.Context())
	must.NoError(t, err)
	first := nextFingerprint(t, ch)
	must.Len(t, 8, first.Devices)
	// Five more passes read the same GPUs: no update. Counted in passes,
	// not time, so a slow machine cannot make this pass without them.
	passes := f.countCalls() + 5
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool { return f.countCalls() > passes }),
		wait.Timeout(30*time.Second), wait.Gap(5*time.Millisecond)))
	select {
	case fp := <-ch:
		t.Fatalf("unexpected fingerprint without change: %d groups", len(fp.Devices))
	default:
	}
	// A GPU disappears. A pass under way when it goes may first report it
	// unhealthy (it was counted, then could not be read); then comes the
	// update with 7 groups. Every update differs from the one before.
	f.setVisible(7)
	prev := groupHealth(first)
	for {
		fp := nextFingerprint(t, ch)
		cur := groupHealth(fp)
		must.NotEq(t, prev, cur, must.Sprint("an update that changes nothing"))
		if len(fp.Devices) == 7 {
			break
		}
		must.Len(t, 8, fp.Devices, must.Sprint("between 8 and 7 GPUs, an update with neither"))
		prev = cur
	}
}

// groupHealth summarises an update: each group's name with its devices'
// health.
func groupHealth(fp *device.FingerprintResponse) map[string]string {
	out := map[string]string{}
	for _, g := range fp.Devices {
		h := ""
		for _, d := range g.Devices {
			h += fmt.Sprintf("%s=%t,", d.ID, d.Healthy)
		}
		out[g.Name] = h
	}
	return out
}

func TestShareIDs_StableAcrossRestarts(t *testing.T) {
	f := newFakeGPUs(t)
	ids := func() []string {
		p := newTestPlugin(t, `config {}`, f.srv, nil)
		var out []string
		for _, g := range p.fingerprintOnce() {
			for _, d := range g.Devices {
				out = append(out, d.ID)
			}
		}
		return out
	}
	first := ids()
	must.Len(t, 32, first)
	must.Eq(t, first, ids())
}

func TestParseShareID(t *testing.T) {
	cases := []struct {
		id    string
		uuid  string
		index int
		ok    bool
	}{
		{"GPU-6b5fa173-5fa6-2d38-54fe-d64c1fe4fe10-share-3", "GPU-6b5fa173-5fa6-2d38-54fe-d64c1fe4fe10", 3, true},
		{"MIG-aa-share-0", "MIG-aa", 0, true},
		{"GPU-x-share-12", "GPU-x", 12, true},
		{"GPU-x-share--1", "", 0, false},
		{"GPU-x-share-", "", 0, false},
		{"-share-1", "", 0, false},
		{"GPU-x", "", 0, false},
		{"GPU-x-share-one", "", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			uuid, idx, ok := parseShareID(tc.id)
			must.Eq(t, tc.ok, ok)
			must.Eq(t, tc.uuid, uuid)
			must.Eq(t, tc.index, idx)
			if ok {
				must.Eq(t, tc.id, shareID(uuid, idx))
			}
		})
	}
}

func TestFingerprint_ShareOverrides(t *testing.T) {
	f := newFakeGPUs(t)
	cfg := fmt.Sprintf(`config {
		shares = 4
		share_override {
			gpu    = "model:NVIDIA H100 80GB HBM3"
			shares = 2
		}
		share_override {
			gpu    = "index:3"
			shares = 8
		}
		share_override {
			gpu    = "uuid:%s"
			shares = 1
		}
		share_override {
			gpu    = "index:5"
			shares = 16
		}
		share_override {
			gpu    = "uuid:%s"
			shares = 3
		}
	}`, f.uuid(1), f.uuid(5))
	p := newTestPlugin(t, cfg, f.srv, nil)
	groups := groupByName(p.fingerprintOnce())
	want := map[int]int{0: 2, 1: 1, 2: 2, 3: 8, 4: 2, 5: 3, 6: 2, 7: 2}
	for i, n := range want {
		g := groups[f.uuid(i)]
		must.Len(t, n, g.Devices, must.Sprintf("gpu %d", i))
		must.Eq(t, int64(n), *g.Attributes[AttrShares].Int)
		must.Eq(t, int64(81920/n), *g.Attributes[AttrMemoryPerShare].Int)
	}
	// N = 1: the whole GPU is one instance.
	must.Eq(t, f.uuid(1)+"-share-0", groups[f.uuid(1)].Devices[0].ID)
}

// enableMIG puts GPU i in MIG mode with n 1g.10gb instances.
func enableMIG(f *fakeGPUs, i, n int) []string {
	dev := f.devs[i]
	dev.GetMigModeFunc = func() (int, int, gonvml.Return) {
		return gonvml.DEVICE_MIG_ENABLE, gonvml.DEVICE_MIG_ENABLE, gonvml.SUCCESS
	}
	dev.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 7, gonvml.SUCCESS }
	var uuids []string
	migs := make([]gonvml.Device, n)
	for j := 0; j < n; j++ {
		uuid := fmt.Sprintf("MIG-%d-%d-0000-0000-000000000000", i, j)
		uuids = append(uuids, uuid)
		gi := j + 1
		migs[j] = &mock.Device{
			GetUUIDFunc: func() (string, gonvml.Return) { return uuid, gonvml.SUCCESS },
			GetNameFunc: func() (string, gonvml.Return) { return "NVIDIA H100 80GB HBM3 MIG 1g.10gb", gonvml.SUCCESS },
			GetMemoryInfoFunc: func() (gonvml.Memory, gonvml.Return) {
				return gonvml.Memory{Total: 10240 << 20}, gonvml.SUCCESS
			},
			GetGpuInstanceIdFunc: func() (int, gonvml.Return) { return gi, gonvml.SUCCESS },
		}
	}
	dev.GetMigDeviceHandleByIndexFunc = func(j int) (gonvml.Device, gonvml.Return) {
		if j < n {
			return migs[j], gonvml.SUCCESS
		}
		return nil, gonvml.ERROR_NOT_FOUND
	}
	return uuids
}

func TestFingerprint_MIG(t *testing.T) {
	f := newFakeGPUs(t)
	migs := enableMIG(f, 0, 3)
	p := newTestPlugin(t, `config {
		share_override {
			gpu    = "model:1g.10gb"
			shares = 2
		}
	}`, f.srv, nil)
	groups := groupByName(p.fingerprintOnce())
	// The MIG-mode parent is replaced by its three instances.
	must.MapLen(t, 7+3, groups)
	must.MapNotContainsKey(t, groups, f.uuid(0))
	for _, uuid := range migs {
		g := groups[uuid]
		must.NotNil(t, g, must.Sprint(uuid))
		must.True(t, *g.Attributes[AttrMIG].Bool)
		must.Eq(t, "1g.10gb", *g.Attributes[AttrMIGProfile].String)
		must.Eq(t, f.uuid(0), *g.Attributes[AttrParentUUID].String)
		must.Eq(t, "NVIDIA H100 80GB HBM3", *g.Attributes[AttrModel].String)
		must.Eq(t, int64(10240), *g.Attributes[AttrMemory].Int)
		must.Len(t, 2, g.Devices)
		must.Eq(t, uuid+"-share-1", g.Devices[1].ID)
		must.Eq(t, "0000:00:00.0", g.Devices[0].HwLocality.PciBusID)
	}
	must.Len(t, 4, groups[f.uuid(1)].Devices, must.Sprint("profile override does not touch whole GPUs"))
}

func TestFingerprint_NoLibraryIsQuiet(t *testing.T) {
	lib := &mock.Interface{
		InitFunc: func() gonvml.Return { return gonvml.ERROR_LIBRARY_NOT_FOUND },
	}
	p := newTestPlugin(t, `config { fingerprint_period = "10ms" }`, lib, nil)
	// Every fingerprint pass reads the clock once at its start: counting
	// the reads counts the passes.
	var passes atomic.Int64
	p.now = func() time.Time { passes.Add(1); return time.Now() }
	ch, err := p.Fingerprint(t.Context())
	must.NoError(t, err)
	fp := nextFingerprint(t, ch)
	must.SliceEmpty(t, fp.Devices)
	// The channel stays open (closing it would make Nomad stop the
	// plugin), and no error follows: five more passes send nothing.
	after := passes.Load() + 5
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool { return passes.Load() > after }),
		wait.Timeout(30*time.Second), wait.Gap(5*time.Millisecond)))
	select {
	case fp, ok := <-ch:
		t.Fatalf("unexpected fingerprint %v (open=%v)", fp, ok)
	default:
	}
	stats := p.collectStats()
	must.SliceEmpty(t, stats.Groups)
	must.NoError(t, stats.Error)
}

func TestFingerprint_Disabled(t *testing.T) {
	f := newFakeGPUs(t)
	p := newTestPlugin(t, `config { enabled = false }`, f.srv, nil)
	_, err := p.Fingerprint(context.Background())
	must.ErrorIs(t, err, device.ErrPluginDisabled)
}

// TestFingerprint_IgnoredGPUIDs: GPUs and MIG instances listed by UUID in
// ignored_gpu_ids are not fingerprinted (a listed MIG-mode GPU takes its
// instances with it), and their shares cannot be reserved.
func TestFingerprint_IgnoredGPUIDs(t *testing.T) {
	f := newFakeGPUs(t)
	migs0 := enableMIG(f, 0, 2)
	migs1 := enableMIG(f, 1, 2)
	p := newTestPlugin(t, fmt.Sprintf(`config {
		ignored_gpu_ids = [%q, %q, %q, "GPU-not-on-this-node"]
	}`, f.uuid(0), migs1[0], f.uuid(7)), f.srv, nil)
	groups := groupByName(p.fingerprintOnce())
	// 8 GPUs: GPU 0 and its two instances gone, GPU 1 replaced by its one
	// instance left, GPUs 2..6 kept, GPU 7 gone.
	must.MapLen(t, 1+5, groups)
	for _, gone := range append([]string{f.uuid(0), f.uuid(1), f.uuid(7), migs1[0]}, migs0...) {
		must.MapNotContainsKey(t, groups, gone)
	}
	must.MapContainsKey(t, groups, migs1[1])
	for i := 2; i <= 6; i++ {
		must.MapContainsKey(t, groups, f.uuid(i))
	}
	_, err := p.Reserve([]string{f.uuid(7) + "-share-0"})
	must.Error(t, err)
	_, err = p.Reserve([]string{f.uuid(2) + "-share-0"})
	must.NoError(t, err)
}
