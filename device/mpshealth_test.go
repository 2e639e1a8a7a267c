//go:build linux

package device

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/device/nvml"
)

// TestHealth_MPSFaultTransitions: an MPS fault marks its GPU unhealthy (or
// every GPU when it names none) until the recovery period passes without
// another; with health checks off it changes nothing.
func TestHealth_MPSFaultTransitions(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	all := []string{"GPU-a", "GPU-b"}
	h := newHealthTracker(healthPolicy{enabled: true, recovery: time.Minute})
	must.True(t, h.recordMPSFault(nvml.MPSFault{UUID: "GPU-a", Reason: "sticky error", Time: t0}, all))
	healthy, desc := h.health(t0, "GPU-a", "")
	must.False(t, healthy)
	must.StrContains(t, desc, "MPS server fault on GPU-a")
	must.StrContains(t, desc, "sticky error")
	healthy, _ = h.health(t0, "GPU-b", "")
	must.True(t, healthy)
	healthy, _ = h.health(t0, "MIG-1", "GPU-a")
	must.False(t, healthy, must.Sprint("a MIG instance of the faulted GPU"))
	must.Eq(t, t0.Add(time.Minute), h.nextRecovery(t0))
	must.False(t, h.recordMPSFault(nvml.MPSFault{UUID: "GPU-a", Reason: "again", Time: t0.Add(30 * time.Second)}, all))
	healthy, _ = h.health(t0.Add(61*time.Second), "GPU-a", "")
	must.False(t, healthy, must.Sprint("a repeated fault restarts the quiet period"))
	healthy, _ = h.health(t0.Add(91*time.Second), "GPU-a", "")
	must.True(t, healthy)

	// A fault naming no GPU: the whole server, every GPU.
	t1 := t0.Add(time.Hour)
	must.True(t, h.recordMPSFault(nvml.MPSFault{Reason: "server exited", Time: t1}, all))
	for _, id := range all {
		healthy, _ := h.health(t1, id, "")
		must.False(t, healthy, must.Sprint(id))
	}

	off := newHealthTracker(healthPolicy{enabled: false, recovery: time.Minute})
	must.False(t, off.recordMPSFault(nvml.MPSFault{Reason: "x", Time: t0}, all))
	healthy, _ = off.health(t0, "GPU-a", "")
	must.True(t, healthy)
}

// TestHealth_MPSFaultFileThroughSimulated: a line appended to the
// simulated backend's MPS fault file marks that GPU unhealthy in the
// fingerprint (so Nomad stops placing there), and it recovers after the
// quiet period, as the Xid file's lines do.
func TestHealth_MPSFaultFileThroughSimulated(t *testing.T) {
	faults := filepath.Join(t.TempDir(), "mps-faults")
	must.NoError(t, os.WriteFile(faults, nil, 0o644))
	p := newTestPlugin(t, fmt.Sprintf(`config {
		backend            = "simulated"
		fingerprint_period = "1h"
		health {
			recovery_period = "1s"
		}
		mps {
			enabled = true
		}
		simulated {
			mps_fault_file = %q
			gpu {
				model      = "A100"
				memory_mib = 40960
			}
			gpu {
				model      = "A100"
				memory_mib = 40960
			}
		}
	}`, faults), nil, nil)
	clock := newTestClock(time.Now())
	p.now = clock.Now
	ch, err := p.Fingerprint(t.Context())
	must.NoError(t, err)
	fp := nextFingerprint(t, ch)
	must.SliceLen(t, 2, fp.Devices)
	bad, good := fp.Devices[1].Name, fp.Devices[0].Name

	must.NoError(t, appendTo(faults, "1 client killed mid-kernel\n"))
	fp = nextFingerprint(t, ch)
	groups := groupByName(fp.Devices)
	for _, d := range groups[bad].Devices {
		must.False(t, d.Healthy)
		must.StrContains(t, d.HealthDesc, "simulated MPS server fault: client killed mid-kernel")
	}
	must.True(t, groups[good].Devices[0].Healthy)

	clock.Set(time.Now().Add(time.Hour))
	fp = nextFingerprint(t, ch)
	for _, d := range groupByName(fp.Devices)[bad].Devices {
		must.True(t, d.Healthy)
	}
}

// TestHealth_MPSFaultsNeedMPS: without MPS there is no MPS server to
// watch.
func TestHealth_MPSFaultsNeedMPS(t *testing.T) {
	p := newTestPlugin(t, `config {
		backend = "simulated"
		simulated {
			mps_fault_file = "/nonexistent/faults"
			gpu {
				model      = "A100"
				memory_mib = 40960
			}
		}
	}`, nil, nil)
	_, err := p.Fingerprint(t.Context())
	must.NoError(t, err)
	p.mu.RLock()
	defer p.mu.RUnlock()
	must.Nil(t, p.mpsCancel)
}

// TestHealth_MPSLogThroughNVML: on the real (NVML) path the plugin tails
// the MPS log directory; a fatal line naming no GPU marks every GPU
// unhealthy.
func TestHealth_MPSLogThroughNVML(t *testing.T) {
	f := newFakeGPUs(t)
	logDir := t.TempDir()
	p := newTestPlugin(t, fmt.Sprintf(`config {
		fingerprint_period = "1h"
		health {
			recovery_period = "1s"
		}
		mps {
			enabled = true
			log_dir = %q
		}
	}`, logDir), f.srv, nil)
	clock := newTestClock(time.Now())
	p.now = clock.Now
	ch, err := p.Fingerprint(t.Context())
	must.NoError(t, err)
	nextFingerprint(t, ch)
	must.NoError(t, appendTo(filepath.Join(logDir, "server.log"), "[2026-11-28 12:00:00.000 Other 77] Server encountered a fatal exception\n"))
	fp := nextFingerprint(t, ch)
	for _, g := range fp.Devices {
		for _, d := range g.Devices {
			must.False(t, d.Healthy, must.Sprint(g.Name))
			must.StrContains(t, d.HealthDesc, "fatal exception")
		}
	}
}

// TestMPSLogWatcher_Lines: the watcher reports new fatal lines of
// control.log and server.log (not history, not other lines), naming the
// GPU whose UUID a line holds; a log that appears later is read from its
// start.
func TestMPSLogWatcher_Lines(t *testing.T) {
	dir := t.TempDir()
	server := filepath.Join(dir, "server.log")
	must.NoError(t, os.WriteFile(server, []byte("[x] fatal: old history\n"), 0o644))
	w := &mpsLogWatcher{dir: dir, poll: 10 * time.Millisecond}
	ch, err := w.WatchMPS(t.Context())
	must.NoError(t, err)
	next := func() nvml.MPSFault {
		select {
		case f := <-ch:
			return f
		case <-time.After(5 * time.Second):
			t.Fatal("no MPS fault from the logs")
		}
		return nvml.MPSFault{}
	}
	uuid := "GPU-6b5fa173-5fa6-2d38-54fe-d64c1fe4fe10"
	must.NoError(t, appendTo(server, "[x] New client 12 connected\n[x] Client 12 disconnected\n"))
	must.NoError(t, appendTo(server, "[x] sticky error on device "+uuid+"; devices will be reset\n"))
	f := next()
	must.Eq(t, uuid, f.UUID)
	must.StrContains(t, f.Reason, "sticky error")
	must.NoError(t, appendTo(filepath.Join(dir, "control.log"), "[y] Server 99 exited with a FATAL error\n"))
	f = next()
	must.Eq(t, "", f.UUID)
	must.StrContains(t, f.Reason, "Server 99 exited")
	select {
	case f := <-ch:
		t.Fatalf("unexpected fault %+v", f)
	default:
	}
}

func appendTo(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(s)
	return err
}
