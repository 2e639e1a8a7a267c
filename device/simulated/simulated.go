// Package simulated is the clearly labelled fake-GPU backend of caravan's
// device plugin: the GPUs a config lists, with usage taken from the task
// processes that reserved them and Xid events from a script or a file. The
// local cluster and CI run on it; it is never substituted for a failed NVML.
package simulated

import (
	"context"
	"crypto/sha1"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/caravan-nomad/caravan/device/nvml"
	"github.com/caravan-nomad/caravan/device/procenv"
	"github.com/caravan-nomad/caravan/internal/satmath"
)

const (
	// Backend is the value of the backend attribute of simulated GPUs.
	Backend = "simulated"

	// EnvMemoryMiB and EnvSMPercent let a task state the usage its
	// simulated GPU should report for it.
	EnvMemoryMiB = "CARAVAN_SIMULATED_GPU_MEMORY_MIB"
	EnvSMPercent = "CARAVAN_SIMULATED_GPU_SM_PERCENT"
	// EnvPeakMemoryMiB lets a task state the peak memory its simulated GPU
	// reports for its process (a spike between stats samples, as NVML
	// accounting would see it); the current memory stands when it is
	// lower.
	EnvPeakMemoryMiB = "CARAVAN_SIMULATED_GPU_PEAK_MEMORY_MIB"

	// envReservation and envVisible are read to find task processes; they
	// mirror the variables the plugin's Reserve sets.
	envReservation = "CARAVAN_GPU_RESERVATION"
	envVisible     = "CUDA_VISIBLE_DEVICES"
	envShareIDs    = "CARAVAN_GPU_SHARE_IDS"
	envFractions   = "CARAVAN_GPU_MEMORY_FRACTION"
	// shareSep is the device plugin's share ID separator
	// ("<GPU UUID>-share-<N>").
	shareSep = "-share-"

	defaultDriverVersion = "550.54.15-simulated"
	defaultCUDAVersion   = "12.4"
	scanTTL              = 500 * time.Millisecond
	xidFilePoll          = 500 * time.Millisecond
)

// Config lists the fake GPUs.
type Config struct {
	// Seed makes generated UUIDs differ between nodes (e.g. the node name).
	Seed          string
	DriverVersion string
	// XidFile, when set, is polled for lines "<uuid or index> <xid>"; each
	// new line raises that Xid on that GPU.
	XidFile string
	// MPSFaultFile, when set, is polled for lines "<uuid or index> <reason>"
	// (or "* <reason>" for the whole server); each new line is a simulated
	// MPS server fault (WatchMPS).
	MPSFaultFile string
	// StateDir, when set, holds one occupancy file per GPU
	// (internal/interference), rewritten atomically whenever the
	// reservations with live processes on the GPU change; tasks find it
	// through interference.EnvStateDir.
	StateDir string
	// MPS says whether the plugin hands tasks the MPS environment; the
	// occupancy files carry it for the interference model.
	MPS  bool
	GPUs []GPUConfig
	// ProcRoot is procfs (default /proc); tests point it elsewhere.
	ProcRoot string
	// Logger receives warnings about tasks' invalid usage claims (default:
	// none).
	Logger hclog.Logger
}

// GPUConfig is one fake GPU.
type GPUConfig struct {
	UUID              string
	Model             string
	MemoryBytes       uint64
	ComputeCapability string
	MIG               []MIGConfig
	// Usage reported per task process that does not set EnvMemoryMiB /
	// EnvSMPercent.
	ProcessMemoryBytes uint64
	ProcessSMPercent   uint32
	Xids               []ScriptedXid
}

// MIGConfig is one MIG instance.
type MIGConfig struct {
	Profile     string
	MemoryBytes uint64
}

// ScriptedXid raises Xid After the backend starts.
type ScriptedXid struct {
	After time.Duration
	Xid   uint64
}

// Describe returns the GPUs (and MIG instances) cfg defines, with their
// UUIDs resolved, in the order NVML would list them.
func Describe(cfg Config) []nvml.GPU {
	var out []nvml.GPU
	for i, g := range cfg.GPUs {
		uuid := g.UUID
		if uuid == "" {
			uuid = "GPU-" + hashUUID(cfg.Seed, strconv.Itoa(i))
		}
		cc := g.ComputeCapability
		if cc == "" {
			cc = "8.0"
		}
		gpu := nvml.GPU{
			UUID:              uuid,
			Index:             i,
			Model:             g.Model,
			MemoryBytes:       g.MemoryBytes,
			PCIBusID:          fmt.Sprintf("00000000:%02X:00.0", 0x10+i),
			ComputeCapability: cc,
		}
		out = append(out, gpu)
		for j, m := range g.MIG {
			out = append(out, nvml.GPU{
				UUID:              "MIG-" + hashUUID(uuid, strconv.Itoa(j)),
				Index:             i,
				Model:             g.Model,
				MemoryBytes:       m.MemoryBytes,
				PCIBusID:          gpu.PCIBusID,
				ComputeCapability: cc,
				MIG:               true,
				ParentUUID:        uuid,
				MIGProfile:        m.Profile,
			})
		}
	}
	return out
}

// hashUUID derives a stable UUID-shaped string from its parts.
func hashUUID(parts ...string) string {
	h := sha1.Sum([]byte("caravan-simulated/" + strings.Join(parts, "/")))
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// Client implements nvml.Client over the configured fake GPUs.
type Client struct {
	cfg     Config
	gpus    []nvml.GPU
	byUUID  map[string]int
	started time.Time
	now     func() time.Time

	mu       sync.Mutex
	scanned  time.Time
	tasks    []taskProcess
	closedCh chan struct{}
	// occupancyDone closes when the occupancy loop has returned (at once
	// when there is none), so Close leaves no write behind it.
	occupancyDone chan struct{}
	// warned holds the invalid claims already logged, so each is logged
	// once, not on every scan.
	warned map[string]bool
	// occupied is the last occupancy written per GPU (the occupancy loop's
	// own).
	occupied map[string]string
}

type taskProcess struct {
	pid       int
	token     string
	visible   []string
	memory    *uint64
	peak      *uint64
	smPercent *uint32
	// shareIDs and fractions are the task's CARAVAN_GPU_SHARE_IDS and
	// CARAVAN_GPU_MEMORY_FRACTION (the latter in visible's order).
	shareIDs  []string
	fractions []string
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = procenv.DefaultRoot
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	gpus := Describe(cfg)
	by := make(map[string]int, len(gpus))
	for i, g := range gpus {
		by[g.UUID] = i
	}
	c := &Client{cfg: cfg, gpus: gpus, byUUID: by, started: time.Now(), now: time.Now,
		closedCh: make(chan struct{}), occupancyDone: make(chan struct{}),
		warned: map[string]bool{}, occupied: map[string]string{}}
	if cfg.StateDir != "" {
		go c.keepOccupancy()
	} else {
		close(c.occupancyDone)
	}
	return c
}

// System reports the simulated driver.
func (c *Client) System() (nvml.System, error) {
	dv := c.cfg.DriverVersion
	if dv == "" {
		dv = defaultDriverVersion
	}
	return nvml.System{DriverVersion: dv, CUDADriverVersion: defaultCUDAVersion, Backend: Backend}, nil
}

// GPUs returns the configured GPUs.
func (c *Client) GPUs() ([]nvml.GPU, error) {
	return append([]nvml.GPU(nil), c.gpus...), nil
}

// Close ends Xid watching and the occupancy loop, and returns once that
// loop has written its last file.
func (c *Client) Close() error {
	c.mu.Lock()
	select {
	case <-c.closedCh:
	default:
		close(c.closedCh)
	}
	c.mu.Unlock()
	<-c.occupancyDone
	return nil
}

// Status reports, for each reservation whose processes list this GPU in
// CUDA_VISIBLE_DEVICES, one process with the configured (or task-stated)
// usage.
func (c *Client) Status(uuid string, sinceMicros uint64) (nvml.Status, error) {
	i, ok := c.byUUID[uuid]
	if !ok {
		return nvml.Status{}, fmt.Errorf("%w: %s", nvml.ErrGPUNotFound, uuid)
	}
	gpu := c.gpus[i]
	gcfg := c.cfg.GPUs[gpu.Index]
	tasks := c.scan()

	st := nvml.Status{UUID: uuid, MemoryTotalBytes: gpu.MemoryBytes, LastSampleMicros: uint64(c.now().UnixMicro())}
	var sm uint32
	for _, t := range tasks {
		if !contains(t.visible, uuid) {
			continue
		}
		p := nvml.Process{PID: uint32(t.pid), UsedMemoryBytes: gcfg.ProcessMemoryBytes, SMUtilPercent: gcfg.ProcessSMPercent}
		if t.memory != nil {
			p.UsedMemoryBytes = *t.memory
		}
		if t.smPercent != nil {
			p.SMUtilPercent = *t.smPercent
		}
		if t.peak != nil {
			p.PeakMemoryBytes = max(*t.peak, p.UsedMemoryBytes)
		}
		st.MemoryUsedBytes = satmath.Add(st.MemoryUsedBytes, p.UsedMemoryBytes)
		sm = satmath.Add32(sm, p.SMUtilPercent)
		st.Processes = append(st.Processes, p)
	}
	util := min(sm, 100)
	memUtil := uint32(0)
	if gpu.MemoryBytes > 0 {
		memUtil = uint32(min(st.MemoryUsedBytes, gpu.MemoryBytes) * 100 / gpu.MemoryBytes)
	}
	power := 60_000 + util*3_000
	temp := 35 + util/4
	var ecc uint64
	st.GPUUtilPercent, st.MemoryUtilPercent = &util, &memUtil
	if !gpu.MIG {
		st.PowerMilliwatts, st.TemperatureCelsius, st.ECCUncorrected = &power, &temp, &ecc
	}
	return st, nil
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// scan finds task processes (those carrying a caravan reservation) at
// most every scanTTL, keeping the lowest PID per reservation so that a
// shell and its children count once.
func (c *Client) scan() []taskProcess {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now().Sub(c.scanned) < scanTTL {
		return c.tasks
	}
	c.scanned = c.now()
	pids, err := procenv.PIDs(c.cfg.ProcRoot)
	if err != nil {
		c.tasks = nil
		return nil
	}
	byToken := map[string]taskProcess{}
	for _, pid := range pids {
		env, err := procenv.Lookup(c.cfg.ProcRoot, pid, envReservation, envVisible, EnvMemoryMiB, EnvSMPercent, EnvPeakMemoryMiB, envShareIDs, envFractions)
		if err != nil || env[envReservation] == "" || env[envVisible] == "" {
			continue
		}
		tok := env[envReservation]
		if prev, ok := byToken[tok]; ok && prev.pid < pid {
			continue
		}
		t := taskProcess{pid: pid, token: tok, visible: strings.Split(env[envVisible], ","),
			shareIDs: splitList(env[envShareIDs]), fractions: splitList(env[envFractions])}
		var errs []error
		var cl claims
		cl, errs = parseClaims(env)
		t.memory, t.peak, t.smPercent = cl.memory, cl.peak, cl.smPercent
		for _, err := range errs {
			c.warnClaim(pid, tok, err)
		}
		byToken[tok] = t
	}
	// A fresh slice: callers may still hold the previous one.
	c.tasks = make([]taskProcess, 0, len(byToken))
	for _, t := range byToken {
		c.tasks = append(c.tasks, t)
	}
	return c.tasks
}

// WatchXid raises the scripted Xids and those appended to XidFile.
func (c *Client) WatchXid(ctx context.Context) (<-chan nvml.XidEvent, error) {
	ch := make(chan nvml.XidEvent)
	var wg sync.WaitGroup
	send := func(ev nvml.XidEvent) bool {
		select {
		case ch <- ev:
			return true
		case <-ctx.Done():
		case <-c.closedCh:
		}
		return false
	}
	for _, g := range c.gpus {
		if g.MIG {
			continue
		}
		for _, x := range c.cfg.GPUs[g.Index].Xids {
			wg.Add(1)
			go func(uuid string, x ScriptedXid) {
				defer wg.Done()
				wait := x.After - time.Since(c.started)
				t := time.NewTimer(max(wait, 0))
				defer t.Stop()
				select {
				case <-t.C:
					send(nvml.XidEvent{UUID: uuid, Xid: x.Xid, Time: c.now()})
				case <-ctx.Done():
				case <-c.closedCh:
				}
			}(g.UUID, x)
		}
	}
	if c.cfg.XidFile != "" {
		start := fileSize(c.cfg.XidFile)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.tailXidFile(ctx, start, send)
		}()
	}
	go func() {
		wg.Wait()
		<-ctx.Done()
		close(ch)
	}()
	return ch, nil
}
