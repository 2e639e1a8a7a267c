package simulated

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/internal/interference"
)

// waitOccupancy polls gpu's occupancy file until it lists want's
// reservations (in order).
func waitOccupancy(t *testing.T, dir, gpu string, want ...string) *interference.Occupancy {
	t.Helper()
	var got *interference.Occupancy
	must.Wait(t, wait.InitialSuccess(wait.ErrorFunc(func() error {
		o, err := interference.ReadFile(dir, gpu)
		if err != nil {
			return err
		}
		var res []string
		for _, h := range o.Holders {
			res = append(res, h.Reservation)
		}
		if fmt.Sprint(res) != fmt.Sprint(want) {
			return fmt.Errorf("holders %v, want %v", res, want)
		}
		got = o
		return nil
	}), wait.Timeout(10*time.Second), wait.Gap(20*time.Millisecond)))
	return got
}

// TestClient_OccupancyFiles: the backend keeps one occupancy file per GPU
// listing the reservations with a live process on it, their shares,
// fractions and stated GPU use, and rewrites it when they come and go.
func TestClient_OccupancyFiles(t *testing.T) {
	cfg := twoGPUs()
	cfg.ProcRoot = t.TempDir()
	cfg.StateDir = filepath.Join(t.TempDir(), "state")
	cfg.MPS = true
	gpus := Describe(cfg)
	g0, g1 := gpus[0].UUID, gpus[1].UUID
	writeEnv(t, cfg.ProcRoot, 100, "CARAVAN_GPU_RESERVATION=r1", "CUDA_VISIBLE_DEVICES="+g0,
		"CARAVAN_GPU_SHARE_IDS="+g0+"-share-0,"+g0+"-share-1", "CARAVAN_GPU_MEMORY_FRACTION=0.5000", EnvSMPercent+"=25")
	writeEnv(t, cfg.ProcRoot, 200, "CARAVAN_GPU_RESERVATION=r2", "CUDA_VISIBLE_DEVICES="+g1+","+g0,
		"CARAVAN_GPU_SHARE_IDS="+g0+"-share-3,"+g1+"-share-0", "CARAVAN_GPU_MEMORY_FRACTION=0.2500,0.2500")
	c := New(cfg)
	t.Cleanup(func() { _ = c.Close() })

	o := waitOccupancy(t, cfg.StateDir, g0, "r1", "r2")
	must.True(t, o.Simulated)
	must.True(t, o.MPS)
	must.Eq(t, g0, o.GPU)
	must.Eq(t, 2, o.Holders[0].Shares)
	must.Eq(t, 0.5, o.Holders[0].Fraction)
	must.Eq(t, uint32(25), *o.Holders[0].SMPercent)
	must.Eq(t, 100, o.Holders[0].PID)
	must.Eq(t, 1, o.Holders[1].Shares)
	must.Eq(t, 0.25, o.Holders[1].Fraction)
	must.Eq(t, uint32(20), *o.Holders[1].SMPercent, must.Sprint("no claim: the GPU's configured usage"))
	waitOccupancy(t, cfg.StateDir, g1, "r2")
	// A MIG instance nobody holds has a file with no holders.
	waitOccupancy(t, cfg.StateDir, gpus[2].UUID)

	// r1's process exits: the file follows.
	must.NoError(t, os.RemoveAll(filepath.Join(cfg.ProcRoot, strconv.Itoa(100))))
	waitOccupancy(t, cfg.StateDir, g0, "r2")

	env, dirs := c.TaskEnv()
	must.Eq(t, map[string]string{interference.EnvStateDir: cfg.StateDir}, env)
	must.Eq(t, []string{cfg.StateDir}, dirs)
}

// TestClient_NoStateDirNoFiles: without state_dir there is no occupancy
// loop and no task environment.
func TestClient_NoStateDirNoFiles(t *testing.T) {
	c := New(twoGPUs())
	env, dirs := c.TaskEnv()
	must.Nil(t, env)
	must.Nil(t, dirs)
}

// TestClient_MPSFaultFile: lines appended to the MPS fault file are MPS
// server faults, by UUID, index or "*" (the whole server), as Xid lines
// are Xids; history and malformed lines raise nothing.
func TestClient_MPSFaultFile(t *testing.T) {
	cfg := twoGPUs()
	cfg.MPSFaultFile = filepath.Join(t.TempDir(), "mps-faults")
	must.NoError(t, os.WriteFile(cfg.MPSFaultFile, []byte("0 old fault\n"), 0o644))
	c := New(cfg)
	gpus := Describe(cfg)
	ch, err := c.WatchMPS(t.Context())
	must.NoError(t, err)
	next := func() string {
		select {
		case f := <-ch:
			return f.UUID + "|" + f.Reason
		case <-time.After(5 * time.Second):
			t.Fatal("no MPS fault from the file")
		}
		return ""
	}
	must.NoError(t, appendLine(cfg.MPSFaultFile, "justonefield"))
	must.NoError(t, appendLine(cfg.MPSFaultFile, "7 no such GPU"))
	must.NoError(t, appendLine(cfg.MPSFaultFile, "1 client killed mid-kernel"))
	must.Eq(t, gpus[1].UUID+"|simulated MPS server fault: client killed mid-kernel", next())
	must.NoError(t, appendLine(cfg.MPSFaultFile, gpus[0].UUID+" sticky error"))
	must.Eq(t, gpus[0].UUID+"|simulated MPS server fault: sticky error", next())
	must.NoError(t, appendLine(cfg.MPSFaultFile, "* server exited"))
	must.Eq(t, "|simulated MPS server fault: server exited", next())

	_, err = New(twoGPUs()).WatchMPS(t.Context())
	must.ErrorIs(t, err, ErrNoMPSFaultFile)
}
