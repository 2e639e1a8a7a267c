//go:build linux

package device

import (
	"sync"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/device/nvml"
)

func TestHealth_XidTransitions(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	type step struct {
		at      time.Duration
		xid     uint64 // 0: no event, just look
		healthy bool
		changed bool
	}
	cases := []struct {
		name   string
		policy healthPolicy
		steps  []step
	}{
		{
			name:   "application xid is ignored",
			policy: healthPolicy{enabled: true, ignored: toSet(defaultIgnoredXids), recovery: time.Minute},
			steps: []step{
				{at: 0, xid: 13, healthy: true},
				{at: time.Second, xid: 31, healthy: true},
				{at: 2 * time.Second, xid: 43, healthy: true},
			},
		},
		{
			name:   "critical xid, then recovery after the quiet period",
			policy: healthPolicy{enabled: true, ignored: toSet(defaultIgnoredXids), recovery: time.Minute},
			steps: []step{
				{at: 0, xid: 79, healthy: false, changed: true},
				{at: 30 * time.Second, healthy: false},
				{at: 61 * time.Second, healthy: true},
			},
		},
		{
			name:   "a repeated critical xid restarts the quiet period",
			policy: healthPolicy{enabled: true, ignored: toSet(defaultIgnoredXids), recovery: time.Minute},
			steps: []step{
				{at: 0, xid: 48, healthy: false, changed: true},
				{at: 50 * time.Second, xid: 48, healthy: false},
				{at: 70 * time.Second, healthy: false},
				{at: 111 * time.Second, healthy: true},
			},
		},
		{
			name:   "critical list limits what counts",
			policy: healthPolicy{enabled: true, ignored: map[uint64]bool{}, critical: toSet([]uint64{79}), recovery: time.Minute},
			steps: []step{
				{at: 0, xid: 48, healthy: true},
				{at: time.Second, xid: 79, healthy: false, changed: true},
			},
		},
		{
			name:   "health checks disabled",
			policy: healthPolicy{enabled: false, recovery: time.Minute},
			steps:  []step{{at: 0, xid: 79, healthy: true}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHealthTracker(tc.policy)
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				if s.xid != 0 {
					_, changed := h.recordXid(nvml.XidEvent{UUID: "GPU-a", Xid: s.xid, Time: now})
					must.Eq(t, s.changed, changed, must.Sprintf("step %d", i))
				}
				healthy, desc := h.health(now, "GPU-a", "")
				must.Eq(t, s.healthy, healthy, must.Sprintf("step %d: %s", i, desc))
				if !healthy {
					must.StrContains(t, desc, "Xid")
				}
				other, _ := h.health(now, "GPU-b", "")
				must.True(t, other, must.Sprint("other GPUs are unaffected"))
			}
		})
	}
}

func TestHealth_ParentXidAffectsMIGInstances(t *testing.T) {
	h := newHealthTracker(healthPolicy{enabled: true, recovery: time.Minute})
	now := time.Now()
	h.recordXid(nvml.XidEvent{UUID: "GPU-parent", Xid: 79, Time: now})
	healthy, desc := h.health(now, "MIG-1", "GPU-parent")
	must.False(t, healthy)
	must.StrContains(t, desc, "GPU-parent")
	must.Eq(t, now.Add(time.Minute), h.nextRecovery(now))
}

// TestHealth_XidThroughNVML sends an Xid through the mock's event set and
// watches the fingerprint turn the GPU unhealthy, then healthy again.
// The plugin's clock is the test's: it stands still until the test moves it
// past the recovery period, so a slow loop on a loaded machine cannot let
// the GPU recover before the unhealthy fingerprint is read (the Xid events'
// times are the adapter's wall clock, just after the frozen instant).
func TestHealth_XidThroughNVML(t *testing.T) {
	f := newFakeGPUs(t)
	p := newTestPlugin(t, `config {
		fingerprint_period = "1h"
		health {
			recovery_period = "1s"
		}
	}`, f.srv, nil)
	clock := newTestClock(time.Now())
	p.now = clock.Now // before Fingerprint starts the loop that reads it
	ch, err := p.Fingerprint(t.Context())
	must.NoError(t, err)
	fp := nextFingerprint(t, ch)
	for _, g := range fp.Devices {
		must.True(t, g.Devices[0].Healthy)
	}

	// An application Xid changes nothing; a critical one marks GPU 2.
	f.events <- gonvml.EventData{Device: f.devs[2], EventType: gonvml.EventTypeXidCriticalError, EventData: 13}
	f.events <- gonvml.EventData{Device: f.devs[2], EventType: gonvml.EventTypeXidCriticalError, EventData: 79}
	fp = nextFingerprint(t, ch)
	groups := groupByName(fp.Devices)
	for _, d := range groups[f.uuid(2)].Devices {
		must.False(t, d.Healthy)
		must.StrContains(t, d.HealthDesc, "Xid 79")
	}
	must.True(t, groups[f.uuid(1)].Devices[0].Healthy)

	// Without further Xids it recovers, even with a long fingerprint period:
	// the loop wakes at the recovery time it computed and finds the clock
	// past it.
	clock.Set(time.Now().Add(time.Hour))
	fp = nextFingerprint(t, ch)
	for _, d := range groupByName(fp.Devices)[f.uuid(2)].Devices {
		must.True(t, d.Healthy)
		must.Eq(t, "", d.HealthDesc)
	}
}

// testClock is a clock that moves only when the test sets it.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock(t time.Time) *testClock { return &testClock{t: t} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}
