package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/caravan-nomad/caravan/internal/s3fault"
)

// S3Faults is the cluster's fault proxy (TEST ONLY): with
// CARAVAN_S3_FAULT_PROXY=1, scripts/cluster.sh puts internal/s3fault's
// proxy between the clients' driver plugins and the S3 server, and the
// test sets and clears faults at runtime through its loopback control
// endpoint. No fault set, every request passes through unchanged.
type S3Faults struct {
	t testing.TB
	// Endpoint is the proxy's address, which the clients' store block
	// names (127.0.0.1:<base+17>); ControlURL its control endpoint's.
	Endpoint, ControlURL string
	control              s3fault.Client
}

// S3Faults returns the cluster's fault proxy, with every fault cleared
// now and when the test ends. It fails the test when the cluster runs
// without it: start it with CARAVAN_STORE=s3 CARAVAN_S3_FAULT_PROXY=1
// (make e2e-s3 does).
func (c *C) S3Faults(t testing.TB) *S3Faults {
	t.Helper()
	c.S3(t)
	if _, err := os.Stat(filepath.Join(c.Dir, "s3-fault-proxy")); err != nil {
		t.Fatalf("harness: the cluster in %s runs without the S3 fault proxy (%v): start it with CARAVAN_STORE=s3 "+
			"CARAVAN_S3_FAULT_PROXY=1 (make e2e-s3 does)", c.Dir, err)
	}
	base := DefaultPortBase
	if v := os.Getenv("CARAVAN_PORT_BASE"); v != "" {
		base, _ = strconv.Atoi(v)
	}
	f := &S3Faults{t: t, Endpoint: fmt.Sprintf("127.0.0.1:%d", base+17), ControlURL: fmt.Sprintf("http://127.0.0.1:%d", base+18)}
	f.control = s3fault.Client{URL: f.ControlURL}
	f.Clear()
	t.Cleanup(f.Clear)
	return f
}

// Set sets a fault (see s3fault.Spec).
func (f *S3Faults) Set(s s3fault.Spec) {
	f.t.Helper()
	if err := f.control.Inject(s); err != nil {
		f.t.Fatalf("harness: %v", err)
	}
}

// Clear removes every fault.
func (f *S3Faults) Clear() {
	f.t.Helper()
	if err := f.control.Clear(); err != nil {
		f.t.Fatalf("harness: %v", err)
	}
}

// Stats reads the proxy's counts.
func (f *S3Faults) Stats() s3fault.Stats {
	f.t.Helper()
	st, err := f.control.Stats()
	if err != nil {
		f.t.Fatalf("harness: %v", err)
	}
	return st
}

// WaitInjected waits until the proxy has applied faults of kind (slow_down,
// reset_body, delay) to at least n requests in all, and returns the count.
func (f *S3Faults) WaitInjected(kind string, n int, timeout time.Duration) int {
	f.t.Helper()
	var got int
	Eventually(f.t, timeout, func() error {
		st := f.Stats()
		if got = st.Injected[kind]; got < n {
			return fmt.Errorf("%d requests got a %s fault, waiting for %d (%d requests in all)", got, kind, n, st.Requests)
		}
		return nil
	})
	return got
}
