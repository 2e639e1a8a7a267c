package simulated

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/device/nvml"
)

func twoGPUs() Config {
	return Config{
		Seed: "node-a",
		GPUs: []GPUConfig{
			{Model: "NVIDIA A100-SXM4-40GB", MemoryBytes: 40960 << 20, ProcessMemoryBytes: 1 << 30, ProcessSMPercent: 20},
			{
				Model: "NVIDIA A100-SXM4-40GB", MemoryBytes: 40960 << 20, ComputeCapability: "8.0",
				MIG: []MIGConfig{{Profile: "3g.20gb", MemoryBytes: 20096 << 20}, {Profile: "3g.20gb", MemoryBytes: 20096 << 20}},
			},
		},
	}
}

func TestDescribe_StableUUIDsAndMIG(t *testing.T) {
	a := Describe(twoGPUs())
	must.Eq(t, a, Describe(twoGPUs()), must.Sprint("same seed, same UUIDs"))
	must.Len(t, 4, a)
	must.StrHasPrefix(t, "GPU-", a[0].UUID)
	must.Eq(t, len("GPU-6b5fa173-5fa6-2d38-54fe-d64c1fe4fe10"), len(a[0].UUID))
	must.NotEq(t, a[0].UUID, a[1].UUID)
	for _, m := range a[2:] {
		must.True(t, m.MIG)
		must.StrHasPrefix(t, "MIG-", m.UUID)
		must.Eq(t, a[1].UUID, m.ParentUUID)
		must.Eq(t, "3g.20gb", m.MIGProfile)
		must.Eq(t, 1, m.Index)
		must.Eq(t, a[1].PCIBusID, m.PCIBusID)
	}
	must.NotEq(t, a[2].UUID, a[3].UUID)

	other := twoGPUs()
	other.Seed = "node-b"
	must.NotEq(t, a[0].UUID, Describe(other)[0].UUID, must.Sprint("nodes get distinct UUIDs"))

	fixed := twoGPUs()
	fixed.GPUs[0].UUID = "GPU-fixed"
	must.Eq(t, "GPU-fixed", Describe(fixed)[0].UUID)
}

func TestClient_SystemIsLabelledSimulated(t *testing.T) {
	s, err := New(twoGPUs()).System()
	must.NoError(t, err)
	must.Eq(t, Backend, s.Backend)
	must.StrContains(t, s.DriverVersion, "simulated")
}

func writeEnv(t *testing.T, root string, pid int, env ...string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	must.NoError(t, os.MkdirAll(dir, 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(dir, "environ"), []byte(strings.Join(env, "\x00")+"\x00"), 0o644))
}

func TestClient_StatusFromTaskProcesses(t *testing.T) {
	cfg := twoGPUs()
	cfg.ProcRoot = t.TempDir()
	c := New(cfg)
	gpus, err := c.GPUs()
	must.NoError(t, err)
	g0, g1 := gpus[0].UUID, gpus[1].UUID

	// Reservation r1: a shell (100) and its child (101) on GPU 0, with the
	// plugin's default usage; r2 states its own usage, on GPUs 0 and 1; 300
	// is not a caravan task.
	writeEnv(t, cfg.ProcRoot, 100, "CARAVAN_GPU_RESERVATION=r1", "CUDA_VISIBLE_DEVICES="+g0)
	writeEnv(t, cfg.ProcRoot, 101, "CARAVAN_GPU_RESERVATION=r1", "CUDA_VISIBLE_DEVICES="+g0)
	writeEnv(t, cfg.ProcRoot, 200, "CARAVAN_GPU_RESERVATION=r2", "CUDA_VISIBLE_DEVICES="+g0+","+g1,
		EnvMemoryMiB+"=3000", EnvSMPercent+"=150")
	writeEnv(t, cfg.ProcRoot, 300, "PATH=/bin", "CUDA_VISIBLE_DEVICES="+g0)

	st, err := c.Status(g0, 0)
	must.NoError(t, err)
	must.Len(t, 2, st.Processes)
	byPID := map[uint32]nvml.Process{}
	for _, p := range st.Processes {
		byPID[p.PID] = p
	}
	must.Eq(t, nvml.Process{PID: 100, UsedMemoryBytes: 1 << 30, SMUtilPercent: 20}, byPID[100])
	must.Eq(t, nvml.Process{PID: 200, UsedMemoryBytes: 3000 << 20, SMUtilPercent: 100}, byPID[200])
	must.Eq(t, uint64(1<<30+3000<<20), st.MemoryUsedBytes)
	must.Eq(t, uint64(40960<<20), st.MemoryTotalBytes)
	must.Eq(t, uint32(100), *st.GPUUtilPercent)
	must.NotNil(t, st.PowerMilliwatts)
	must.NotNil(t, st.TemperatureCelsius)

	st1, err := c.Status(g1, 0)
	must.NoError(t, err)
	must.Len(t, 1, st1.Processes)
	must.Eq(t, uint32(200), st1.Processes[0].PID)

	_, err = c.Status("GPU-missing", 0)
	must.ErrorIs(t, err, nvml.ErrGPUNotFound)
}

func TestClient_ScriptedXid(t *testing.T) {
	cfg := twoGPUs()
	cfg.GPUs[0].Xids = []ScriptedXid{{After: 10 * time.Millisecond, Xid: 79}}
	c := New(cfg)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := c.WatchXid(ctx)
	must.NoError(t, err)
	select {
	case ev := <-ch:
		must.Eq(t, Describe(cfg)[0].UUID, ev.UUID)
		must.Eq(t, uint64(79), ev.Xid)
	case <-time.After(5 * time.Second):
		t.Fatal("scripted Xid not raised")
	}
	cancel()
	for range ch {
	}
}

func TestClient_XidFile(t *testing.T) {
	cfg := twoGPUs()
	cfg.XidFile = filepath.Join(t.TempDir(), "xid")
	// History present at start is not replayed.
	must.NoError(t, os.WriteFile(cfg.XidFile, []byte("0 48\n"), 0o644))
	c := New(cfg)
	gpus := Describe(cfg)
	ch, err := c.WatchXid(t.Context())
	must.NoError(t, err)

	nextXid := func() nvml.XidEvent {
		select {
		case ev := <-ch:
			return ev
		case <-time.After(5 * time.Second):
			t.Fatal("no Xid from the file")
		}
		return nvml.XidEvent{}
	}
	must.NoError(t, appendLine(cfg.XidFile, "bogus line"))
	must.NoError(t, appendLine(cfg.XidFile, "1 79"))
	ev := nextXid()
	must.Eq(t, gpus[1].UUID, ev.UUID)
	must.Eq(t, uint64(79), ev.Xid)
	must.NoError(t, appendLine(cfg.XidFile, gpus[0].UUID+" 31"))
	ev = nextXid()
	must.Eq(t, gpus[0].UUID, ev.UUID)
	must.Eq(t, uint64(31), ev.Xid)
}

func appendLine(path, line string) error {
	if line == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(line + "\n")
	return err
}

// TestClient_MemoryClaimValidated: a task claiming more memory than any
// simulated GPU has (2^44 MiB, which wrapped to 0 bytes) or a claim that is
// not a number is refused with a warning naming the variable, and the
// GPU's configured usage stands; a valid claim still counts.
func TestClient_MemoryClaimValidated(t *testing.T) {
	cases := []struct {
		name, claim string
		wantBytes   uint64
		wantWarn    string
	}{
		{"valid", "3000", 3000 << 20, ""},
		{"at the bound", strconv.Itoa(maxMemoryMiB), maxMemoryMiB << 20, ""},
		{"wraps to zero in bytes", "17592186044416", 1 << 30, EnvMemoryMiB + "=17592186044416"},
		{"max uint64", "18446744073709551615", 1 << 30, EnvMemoryMiB + "=18446744073709551615"},
		{"not a number", "lots", 1 << 30, EnvMemoryMiB + `=\"lots\"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			cfg := twoGPUs()
			cfg.ProcRoot = t.TempDir()
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
			c := New(cfg)
			g0 := Describe(cfg)[0].UUID
			writeEnv(t, cfg.ProcRoot, 100, "CARAVAN_GPU_RESERVATION=r1", "CUDA_VISIBLE_DEVICES="+g0, EnvMemoryMiB+"="+tc.claim)
			st, err := c.Status(g0, 0)
			must.NoError(t, err)
			must.Eq(t, tc.wantBytes, st.MemoryUsedBytes)
			if tc.wantWarn == "" {
				must.Eq(t, "", logs.String())
				return
			}
			must.StrContains(t, logs.String(), tc.wantWarn)
		})
	}
}

// TestClient_UsedMemorySaturates: processes whose claims together exceed
// uint64 read as the maximum, never as a small number.
func TestClient_UsedMemorySaturates(t *testing.T) {
	cfg := twoGPUs()
	cfg.ProcRoot = t.TempDir()
	cfg.GPUs[0].ProcessMemoryBytes = 1 << 63 // beyond any claim, as only Go code can set it
	c := New(cfg)
	g0 := Describe(cfg)[0].UUID
	writeEnv(t, cfg.ProcRoot, 100, "CARAVAN_GPU_RESERVATION=r1", "CUDA_VISIBLE_DEVICES="+g0)
	writeEnv(t, cfg.ProcRoot, 200, "CARAVAN_GPU_RESERVATION=r2", "CUDA_VISIBLE_DEVICES="+g0)
	st, err := c.Status(g0, 0)
	must.NoError(t, err)
	must.Eq(t, uint64(math.MaxUint64), st.MemoryUsedBytes)
	must.Eq(t, uint32(100), *st.MemoryUtilPercent)
}
