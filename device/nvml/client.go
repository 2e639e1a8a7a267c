// Package nvml is caravan's narrow view of NVIDIA's management library: the
// few queries the device plugin needs, returned as plain structs. The plugin
// never sees go-nvml types; the real implementation (adapter.go, Linux only)
// wraps a go-nvml Interface, the simulated backend implements Client too.
package nvml

import (
	"context"
	"errors"
	"time"
)

// ErrLibraryNotFound is returned by New when the host has no libnvidia-ml:
// the plugin then reports no devices quietly.
var ErrLibraryNotFound = errors.New("nvml: libnvidia-ml not found")

// ErrGPUNotFound is returned for a UUID the client does not know.
var ErrGPUNotFound = errors.New("nvml: gpu not found")

// Client is everything the device plugin asks of NVML.
type Client interface {
	// System returns driver-wide facts.
	System() (System, error)
	// GPUs lists physical GPUs and, for GPUs in MIG mode, their MIG
	// instances (as separate entries with MIG set).
	GPUs() ([]GPU, error)
	// Status reads utilisation, memory, power, temperature, ECC and the
	// processes on one GPU (or MIG instance). sinceMicros is the NVML
	// timestamp of the previous process-utilisation sample.
	Status(uuid string, sinceMicros uint64) (Status, error)
	// WatchXid delivers Xid events until ctx is done.
	WatchXid(ctx context.Context) (<-chan XidEvent, error)
	// Close releases the library (pairs with the Init done by New).
	Close() error
}

// System holds driver-wide facts.
type System struct {
	DriverVersion     string
	CUDADriverVersion string
	Backend           string
}

// GPU is one schedulable unit: a physical GPU or a MIG instance.
type GPU struct {
	UUID              string
	Index             int
	Model             string
	MemoryBytes       uint64
	PCIBusID          string
	ComputeCapability string
	// MIG instances carry their parent GPU's UUID and their profile name.
	MIG        bool
	ParentUUID string
	MIGProfile string
	// Problem is set when the GPU answered to its UUID but not to other
	// queries: it is listed, so it can be reported unhealthy.
	Problem string
}

// Status is one stats sample of a GPU or MIG instance.
type Status struct {
	UUID               string
	GPUUtilPercent     *uint32
	MemoryUtilPercent  *uint32
	MemoryUsedBytes    uint64
	MemoryTotalBytes   uint64
	PowerMilliwatts    *uint32
	TemperatureCelsius *uint32
	ECCUncorrected     *uint64
	// Processes is every compute and MPS process with its memory and, when
	// NVML sampled it since sinceMicros, its SM utilisation.
	Processes []Process
	// LastSampleMicros is the newest process-utilisation timestamp seen;
	// pass it back as sinceMicros next time.
	LastSampleMicros uint64
}

// Process is a process using a GPU.
type Process struct {
	PID             uint32
	UsedMemoryBytes uint64
	SMUtilPercent   uint32
	MPS             bool
	// PeakMemoryBytes is the most memory the backend itself saw the
	// process use, 0 when it does not know: NVML's process lists carry
	// no peak (the real adapter leaves it 0); the simulated backend
	// reports a task's stated peak.
	PeakMemoryBytes uint64
}

// XidEvent is an Xid error NVML reported for a GPU.
type XidEvent struct {
	UUID string
	Xid  uint64
	Time time.Time
}

// MPSFault is a fatal fault the MPS server reported: its clients fail, and
// new clients are refused until it restarts.
type MPSFault struct {
	// UUID is the GPU the fault names, or "" for every GPU the server
	// serves (an MPS server's log does not always name one).
	UUID   string
	Reason string
	Time   time.Time
}

// MPSWatcher reports an MPS server's fatal faults. A backend that knows
// them itself implements it (the simulated backend, from its fault file);
// for any other backend the plugin watches the MPS log directory.
type MPSWatcher interface {
	// WatchMPS delivers MPS faults until ctx is done.
	WatchMPS(ctx context.Context) (<-chan MPSFault, error)
}
