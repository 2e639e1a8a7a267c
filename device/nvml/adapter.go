//go:build linux && cgo

package nvml

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/caravan-nomad/caravan/internal/satmath"
)

// xidWaitMillis bounds one blocking NVML event wait so cancellation is
// noticed promptly.
const xidWaitMillis = 1000

// Adapter implements Client over a go-nvml Interface: the real library
// (New) or go-nvml's mock in tests (NewAdapter).
type Adapter struct {
	lib gonvml.Interface

	mu      sync.Mutex
	handles map[string]gonvml.Device
	// physical lists the UUIDs of physical GPUs (Xid events are
	// registered on these).
	physical []string
	// migByInstance maps a parent UUID and GPU instance ID to the MIG
	// instance's UUID, to route Xid events to the right instance.
	migByInstance map[migKey]string
}

type migKey struct {
	parent string
	gi     uint32
}

// NewAdapter initialises lib and returns a Client over it. A missing
// library yields ErrLibraryNotFound.
func NewAdapter(lib gonvml.Interface) (*Adapter, error) {
	if ret := lib.Init(); ret != gonvml.SUCCESS {
		if ret == gonvml.ERROR_LIBRARY_NOT_FOUND {
			return nil, ErrLibraryNotFound
		}
		return nil, fmt.Errorf("nvml: init: %w", ret)
	}
	return &Adapter{
		lib:           lib,
		handles:       map[string]gonvml.Device{},
		migByInstance: map[migKey]string{},
	}, nil
}

// Close shuts the library down.
func (a *Adapter) Close() error {
	if ret := a.lib.Shutdown(); ret != gonvml.SUCCESS {
		return fmt.Errorf("nvml: shutdown: %w", ret)
	}
	return nil
}

// System returns the driver and CUDA driver versions.
func (a *Adapter) System() (System, error) {
	driver, ret := a.lib.SystemGetDriverVersion()
	if ret != gonvml.SUCCESS {
		return System{}, fmt.Errorf("nvml: driver version: %w", ret)
	}
	s := System{DriverVersion: driver, Backend: "nvml"}
	if cuda, ret := a.lib.SystemGetCudaDriverVersion(); ret == gonvml.SUCCESS {
		s.CUDADriverVersion = fmt.Sprintf("%d.%d", cuda/1000, (cuda%1000)/10)
	}
	return s, nil
}

// GPUs enumerates physical GPUs and their MIG instances, caching handles
// for Status.
func (a *Adapter) GPUs() ([]GPU, error) {
	count, ret := a.lib.DeviceGetCount()
	if ret != gonvml.SUCCESS {
		return nil, fmt.Errorf("nvml: device count: %w", ret)
	}
	handles := make(map[string]gonvml.Device, count)
	physical := make([]string, 0, count)
	migs := map[migKey]string{}
	out := make([]GPU, 0, count)
	for i := 0; i < count; i++ {
		dev, ret := a.lib.DeviceGetHandleByIndex(i)
		if ret != gonvml.SUCCESS {
			return nil, fmt.Errorf("nvml: device %d handle: %w", i, ret)
		}
		gpu, err := describe(dev)
		if err != nil {
			return nil, fmt.Errorf("nvml: device %d: %w", i, err)
		}
		gpu.Index = i
		if pci, ret := dev.GetPciInfo(); ret == gonvml.SUCCESS {
			gpu.PCIBusID = cString(pci.BusId[:])
		}
		if major, minor, ret := dev.GetCudaComputeCapability(); ret == gonvml.SUCCESS {
			gpu.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
		}
		handles[gpu.UUID] = dev
		physical = append(physical, gpu.UUID)
		out = append(out, gpu)

		current, _, ret := dev.GetMigMode()
		if ret != gonvml.SUCCESS || current != gonvml.DEVICE_MIG_ENABLE {
			continue
		}
		max, ret := dev.GetMaxMigDeviceCount()
		if ret != gonvml.SUCCESS {
			return nil, fmt.Errorf("nvml: device %d mig count: %w", i, ret)
		}
		for j := 0; j < max; j++ {
			mig, ret := dev.GetMigDeviceHandleByIndex(j)
			if ret == gonvml.ERROR_NOT_FOUND || ret == gonvml.ERROR_INVALID_ARGUMENT {
				continue
			}
			if ret != gonvml.SUCCESS {
				return nil, fmt.Errorf("nvml: device %d mig %d handle: %w", i, j, ret)
			}
			m, err := describe(mig)
			if err != nil {
				return nil, fmt.Errorf("nvml: device %d mig %d: %w", i, j, err)
			}
			m.Index = i
			m.MIG = true
			m.ParentUUID = gpu.UUID
			m.PCIBusID = gpu.PCIBusID
			m.ComputeCapability = gpu.ComputeCapability
			m.MIGProfile = migProfile(m.Model)
			m.Model = gpu.Model
			if gi, ret := mig.GetGpuInstanceId(); ret == gonvml.SUCCESS {
				migs[migKey{gpu.UUID, uint32(gi)}] = m.UUID
			}
			handles[m.UUID] = mig
			out = append(out, m)
		}
	}
	a.mu.Lock()
	a.handles = handles
	a.physical = physical
	a.migByInstance = migs
	a.mu.Unlock()
	return out, nil
}

func describe(dev gonvml.Device) (GPU, error) {
	uuid, ret := dev.GetUUID()
	if ret != gonvml.SUCCESS {
		return GPU{}, fmt.Errorf("uuid: %w", ret)
	}
	g := GPU{UUID: uuid}
	var problems []string
	name, ret := dev.GetName()
	if ret != gonvml.SUCCESS {
		problems = append(problems, "name: "+ret.Error())
	}
	g.Model = name
	mem, ret := dev.GetMemoryInfo()
	if ret != gonvml.SUCCESS {
		problems = append(problems, "memory: "+ret.Error())
	}
	g.MemoryBytes = mem.Total
	g.Problem = strings.Join(problems, "; ")
	return g, nil
}

// migProfile extracts "1g.10gb" from a MIG device name such as
// "NVIDIA H100 80GB HBM3 MIG 1g.10gb".
func migProfile(name string) string {
	if i := strings.LastIndex(name, "MIG "); i >= 0 {
		return name[i+len("MIG "):]
	}
	return name
}

func cString(b []int8) string {
	buf := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		buf = append(buf, byte(c))
	}
	return string(buf)
}

func (a *Adapter) handle(uuid string) (gonvml.Device, error) {
	a.mu.Lock()
	dev, ok := a.handles[uuid]
	a.mu.Unlock()
	if ok {
		return dev, nil
	}
	dev, ret := a.lib.DeviceGetHandleByUUID(uuid)
	if ret == gonvml.ERROR_NOT_FOUND || ret == gonvml.ERROR_INVALID_ARGUMENT {
		return nil, fmt.Errorf("%w: %s", ErrGPUNotFound, uuid)
	}
	if ret != gonvml.SUCCESS {
		return nil, fmt.Errorf("nvml: handle %s: %w", uuid, ret)
	}
	a.mu.Lock()
	a.handles[uuid] = dev
	a.mu.Unlock()
	return dev, nil
}

// Status reads one GPU's counters and processes: a fixed number of NVML
// calls per GPU, independent of how many shares or processes it has.
func (a *Adapter) Status(uuid string, sinceMicros uint64) (Status, error) {
	dev, err := a.handle(uuid)
	if err != nil {
		return Status{}, err
	}
	st := Status{UUID: uuid, LastSampleMicros: sinceMicros}
	mem, ret := dev.GetMemoryInfo()
	if ret != gonvml.SUCCESS {
		// A GPU that cannot report its memory is gone or broken.
		return Status{}, fmt.Errorf("nvml: %s memory: %w", uuid, ret)
	}
	st.MemoryUsedBytes, st.MemoryTotalBytes = mem.Used, mem.Total
	if u, ret := dev.GetUtilizationRates(); ret == gonvml.SUCCESS {
		st.GPUUtilPercent, st.MemoryUtilPercent = &u.Gpu, &u.Memory
	}
	if p, ret := dev.GetPowerUsage(); ret == gonvml.SUCCESS {
		st.PowerMilliwatts = &p
	}
	if t, ret := dev.GetTemperature(gonvml.TEMPERATURE_GPU); ret == gonvml.SUCCESS {
		st.TemperatureCelsius = &t
	}
	if e, ret := dev.GetTotalEccErrors(gonvml.MEMORY_ERROR_TYPE_UNCORRECTED, gonvml.VOLATILE_ECC); ret == gonvml.SUCCESS {
		st.ECCUncorrected = &e
	}

	compute, ret := dev.GetComputeRunningProcesses()
	if err := processErr(ret); err != nil {
		return Status{}, fmt.Errorf("nvml: %s compute processes: %w", uuid, err)
	}
	mps, ret := dev.GetMPSComputeRunningProcesses()
	if err := processErr(ret); err != nil {
		return Status{}, fmt.Errorf("nvml: %s mps processes: %w", uuid, err)
	}
	procs := mergeProcesses(compute, mps)
	index := make(map[uint32]int, len(procs))
	for i, p := range procs {
		index[p.PID] = i
	}

	samples, ret := dev.GetProcessUtilization(sinceMicros)
	if err := processErr(ret); err != nil {
		return Status{}, fmt.Errorf("nvml: %s process utilization: %w", uuid, err)
	}
	for _, s := range samples {
		if s.TimeStamp > st.LastSampleMicros {
			st.LastSampleMicros = s.TimeStamp
		}
		if i, ok := index[s.Pid]; ok && s.SmUtil > procs[i].SMUtilPercent {
			procs[i].SMUtilPercent = s.SmUtil
		}
	}
	st.Processes = procs
	return st, nil
}

// mergeProcesses lists each process once. Within one list a PID's entries
// add up (one per instance it uses); across the two lists they are the same
// process: NVML lists every MPS client in both, each time with its whole
// memory, so the larger figure counts, and the process is marked MPS.
func mergeProcesses(compute, mps []gonvml.ProcessInfo) []Process {
	procs := listProcesses(compute, false)
	index := make(map[uint32]int, len(procs)+len(mps))
	for i, p := range procs {
		index[p.PID] = i
	}
	for _, p := range listProcesses(mps, true) {
		if i, ok := index[p.PID]; ok {
			procs[i].UsedMemoryBytes = max(procs[i].UsedMemoryBytes, p.UsedMemoryBytes)
			procs[i].MPS = true
			continue
		}
		index[p.PID] = len(procs)
		procs = append(procs, p)
	}
	return procs
}

// listProcesses turns one NVML process list into processes, a PID's
// entries summed.
func listProcesses(infos []gonvml.ProcessInfo, isMPS bool) []Process {
	procs := make([]Process, 0, len(infos))
	index := make(map[uint32]int, len(infos))
	for _, p := range infos {
		used := p.UsedGpuMemory
		if used == valueNotAvailable {
			used = 0
		}
		if i, ok := index[p.Pid]; ok {
			procs[i].UsedMemoryBytes = satmath.Add(procs[i].UsedMemoryBytes, used)
			continue
		}
		index[p.Pid] = len(procs)
		procs = append(procs, Process{PID: p.Pid, UsedMemoryBytes: used, MPS: isMPS})
	}
	return procs
}

// valueNotAvailable is NVML_VALUE_NOT_AVAILABLE: what NVML reports as a
// process's used memory when it cannot tell (WDDM, some MPS set-ups).
const valueNotAvailable = ^uint64(0)

// processErr treats "not found" (no samples) and "not supported" as no
// data rather than failures.
func processErr(ret gonvml.Return) error {
	switch ret {
	case gonvml.SUCCESS, gonvml.ERROR_NOT_FOUND, gonvml.ERROR_NOT_SUPPORTED:
		return nil
	}
	return ret
}

// WatchXid registers every physical GPU for Xid critical-error events and
// delivers them until ctx is done. GPUs that do not support events are
// skipped; it is an error only if none does.
func (a *Adapter) WatchXid(ctx context.Context) (<-chan XidEvent, error) {
	set, ret := a.lib.EventSetCreate()
	if ret != gonvml.SUCCESS {
		return nil, fmt.Errorf("nvml: event set: %w", ret)
	}
	a.mu.Lock()
	var registered int
	var errs []error
	for _, uuid := range a.physical {
		dev := a.handles[uuid]
		ret := dev.RegisterEvents(gonvml.EventTypeXidCriticalError, set)
		if ret != gonvml.SUCCESS {
			errs = append(errs, fmt.Errorf("%s: %w", uuid, ret))
			continue
		}
		registered++
	}
	a.mu.Unlock()
	if registered == 0 && len(errs) > 0 {
		set.Free()
		return nil, fmt.Errorf("nvml: register xid events: %w", errors.Join(errs...))
	}

	ch := make(chan XidEvent)
	go func() {
		defer close(ch)
		defer set.Free()
		for ctx.Err() == nil {
			data, ret := set.Wait(xidWaitMillis)
			if ret == gonvml.ERROR_TIMEOUT {
				continue
			}
			if ret != gonvml.SUCCESS {
				// Transient failures must not spin the CPU.
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
			if data.EventType != gonvml.EventTypeXidCriticalError {
				continue
			}
			uuid, ret := data.Device.GetUUID()
			if ret != gonvml.SUCCESS {
				continue
			}
			a.mu.Lock()
			if mig, ok := a.migByInstance[migKey{uuid, data.GpuInstanceId}]; ok {
				uuid = mig
			}
			a.mu.Unlock()
			select {
			case ch <- XidEvent{UUID: uuid, Xid: data.EventData, Time: time.Now()}:
			case <-ctx.Done():
			}
		}
	}()
	return ch, nil
}
