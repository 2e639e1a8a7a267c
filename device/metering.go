package device

import (
	"strings"
	"sync"

	"github.com/caravan-nomad/caravan/device/procenv"
)

// meter attributes GPU processes to reservations. A task's processes carry
// the CARAVAN_GPU_RESERVATION token and CARAVAN_GPU_SHARE_IDS that Reserve
// returned; the meter reads them from /proc/<pid>/environ once per PID and
// caches the answer (including "not a caravan task") while NVML keeps
// reporting that PID.
type meter struct {
	procRoot string

	mu sync.Mutex
	// owners caches PID -> owner; a nil owner means unattributable.
	owners map[uint32]*owner
	seen   map[uint32]bool
	// lastSample is NVML's newest process-utilisation timestamp per GPU.
	lastSample map[string]uint64
	// peaks is each reservation's GPU memory high-water mark per GPU;
	// peakSeen the reservations a pass reported.
	peaks    map[peakKey]uint64
	peakSeen map[string]bool
}

// peakKey is a reservation's token and a GPU's UUID.
type peakKey struct{ token, uuid string }

// owner is the reservation a process belongs to.
type owner struct {
	token string
	// shares groups the reservation's share IDs by GPU UUID.
	shares map[string][]string
}

func newMeter(procRoot string) *meter {
	return &meter{
		procRoot:   procRoot,
		owners:     map[uint32]*owner{},
		seen:       map[uint32]bool{},
		lastSample: map[string]uint64{},
		peaks:      map[peakKey]uint64{},
		peakSeen:   map[string]bool{},
	}
}

// begin starts a metering pass.
func (m *meter) begin() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.seen)
	clear(m.peakSeen)
}

// end drops cached PIDs that no GPU reported during the pass, so a reused
// PID is looked up afresh.
func (m *meter) end() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for pid := range m.owners {
		if !m.seen[pid] {
			delete(m.owners, pid)
		}
	}
}

// ownerOf returns the reservation owning pid, or nil when the process is
// not a caravan task (or its environment cannot be read).
func (m *meter) ownerOf(pid uint32) *owner {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[pid] = true
	if o, ok := m.owners[pid]; ok {
		return o
	}
	o := m.lookup(pid)
	m.owners[pid] = o
	return o
}

func (m *meter) lookup(pid uint32) *owner {
	env, err := procenv.Lookup(m.procRoot, int(pid), EnvReservation, EnvShareIDs)
	if err != nil || env[EnvReservation] == "" {
		return nil
	}
	o := &owner{token: env[EnvReservation], shares: map[string][]string{}}
	for _, id := range strings.Split(env[EnvShareIDs], ",") {
		if uuid, _, ok := parseShareID(id); ok {
			o.shares[uuid] = append(o.shares[uuid], id)
		}
	}
	return o
}

func (m *meter) since(uuid string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastSample[uuid]
}

func (m *meter) setSince(uuid string, ts uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastSample[uuid] = ts
}

// raisePeak records that reservation token used v bytes of GPU uuid at
// some point and returns its high-water mark there.
func (m *meter) raisePeak(token, uuid string, v uint64) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := peakKey{token, uuid}
	m.peakSeen[token] = true
	m.peaks[k] = max(m.peaks[k], v)
	return m.peaks[k]
}

// peak is reservation token's high-water mark on GPU uuid (0: none seen).
func (m *meter) peak(token, uuid string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peaks[peakKey{token, uuid}]
}

// forgetPeaks drops the marks of reservations the last pass did not report
// and keep does not know (ended tasks), so the map stays bounded.
func (m *meter) forgetPeaks(keep func(token string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.peaks {
		if !m.peakSeen[k.token] && !keep(k.token) {
			delete(m.peaks, k)
		}
	}
}

// usage is one reservation's use of one GPU during a pass.
type usage struct {
	token       string
	shares      []string
	memoryBytes uint64
	smPercent   uint32
	processes   int
	// peakSample is this pass's sum of each process's peak (or current
	// use where the backend knows no peak); peakBytes the reservation's
	// high-water mark on this GPU.
	peakSample uint64
	peakBytes  uint64
}
