package device

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/plugins/device"
)

// Environment variables Reserve gives a task. NVIDIA_VISIBLE_DEVICES and
// CUDA_VISIBLE_DEVICES list physical (or MIG) UUIDs; the CUDA_MPS_* pair is
// what an MPS client reads; the CARAVAN_GPU_* variables are caravan's own,
// documented in device/README.md. Lists follow CUDA_VISIBLE_DEVICES order.
const (
	EnvNvidiaVisibleDevices   = "NVIDIA_VISIBLE_DEVICES"
	EnvCUDAVisibleDevices     = "CUDA_VISIBLE_DEVICES"
	EnvMPSPinnedMemLimit      = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
	EnvMPSActiveThreadPct     = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
	EnvMPSPipeDirectory       = "CUDA_MPS_PIPE_DIRECTORY"
	EnvMPSLogDirectory        = "CUDA_MPS_LOG_DIRECTORY"
	EnvReservation            = "CARAVAN_GPU_RESERVATION"
	EnvShareIDs               = "CARAVAN_GPU_SHARE_IDS"
	EnvMemoryFraction         = "CARAVAN_GPU_MEMORY_FRACTION"
	EnvMemoryLimitBytes       = "CARAVAN_GPU_MEMORY_LIMIT_BYTES"
	EnvComputePercent         = "CARAVAN_GPU_COMPUTE_PERCENT"
	EnvBackend                = "CARAVAN_GPU_BACKEND"
	maxReservationsRemembered = 4096
)

var (
	// ErrUnknownShare is returned for an ID that is not a share of any
	// GPU this plugin knows.
	ErrUnknownShare = errors.New("unknown GPU share")
	// ErrStaleShare is returned for an ID that was advertised earlier but
	// no longer exists (the GPU disappeared or its share count shrank).
	ErrStaleShare = errors.New("stale GPU share")
)

// Reserve checks that every ID is a current share and returns the task's
// environment: the GPUs' UUIDs, per-GPU memory limits and compute
// fractions, a reservation token that metering reads back, and the MPS
// directories when MPS is enabled.
func (p *Plugin) Reserve(ids []string) (*device.ContainerReservation, error) {
	if len(ids) == 0 {
		return &device.ContainerReservation{}, nil
	}
	s, client, _ := p.state()
	if s == nil {
		return nil, fmt.Errorf("caravan-gpu: reserve before SetConfig")
	}
	p.mu.RLock()
	inv := p.inv
	perGPU, errs := countShares(inv, p.advertised, ids)
	p.mu.RUnlock()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("caravan-gpu: reserve: %w", err)
	}

	entries := reservedEntries(inv, perGPU)

	token := newToken()
	sorted := append([]string(nil), ids...)
	sort.Strings(sorted)
	res := &device.ContainerReservation{Envs: shareEnvs(inv, entries, perGPU, token, sorted)}
	if s.mps.Enabled {
		res.Envs[EnvMPSPipeDirectory] = s.mps.PipeDir
		res.Envs[EnvMPSLogDirectory] = s.mps.LogDir
		res.Mounts = []*device.Mount{
			{TaskPath: s.mps.PipeDir, HostPath: s.mps.PipeDir},
			{TaskPath: s.mps.LogDir, HostPath: s.mps.LogDir},
		}
	}
	if te, ok := client.(taskEnver); ok {
		env, dirs := te.TaskEnv()
		for k, v := range env {
			res.Envs[k] = v
		}
		// Mounted at the same path, as the MPS directories are, and not
		// read-only: the caravan driver has no filesystem isolation and
		// refuses a read-only mount its task would see writable, which
		// failed every caravan task on a simulated GPU.
		for _, d := range dirs {
			res.Mounts = append(res.Mounts, &device.Mount{TaskPath: d, HostPath: d})
		}
	}
	p.reservations.add(token, sorted, p.now())
	p.reserveLogger.Info("reserved shares", "reservation", token, "shares", sorted)
	return res, nil
}

// countShares checks that every ID is a current, distinct share of inv and
// counts the shares asked of each GPU. advertised holds the IDs offered
// earlier, so that a share of a vanished GPU reads as stale.
func countShares(inv *inventory, advertised map[string]bool, ids []string) (map[string]int, []error) {
	var errs []error
	perGPU := map[string]int{}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			errs = append(errs, fmt.Errorf("%w: %q requested twice", ErrUnknownShare, id))
			continue
		}
		seen[id] = true
		uuid, idx, ok := parseShareID(id)
		if !ok {
			errs = append(errs, fmt.Errorf("%w: %q is not a caravan share ID (want <GPU-UUID>%s<N>)", ErrUnknownShare, id, shareSep))
			continue
		}
		e, _, ok := inv.lookup(uuid)
		switch {
		case !ok && advertised[id]:
			errs = append(errs, fmt.Errorf("%w: %q: GPU %s is no longer present on this node", ErrStaleShare, id, uuid))
		case !ok:
			errs = append(errs, fmt.Errorf("%w: %q: no GPU %s on this node", ErrUnknownShare, id, uuid))
		case idx >= e.shares:
			errs = append(errs, fmt.Errorf("%w: %q: GPU %s now has %d shares (IDs %s through %s)",
				ErrStaleShare, id, uuid, e.shares, shareID(uuid, 0), shareID(uuid, e.shares-1)))
		default:
			perGPU[uuid]++
		}
	}
	return perGPU, errs
}

// reservedEntries returns the GPUs of perGPU, ordered by index then UUID.
func reservedEntries(inv *inventory, perGPU map[string]int) []*gpuEntry {
	entries := make([]*gpuEntry, 0, len(perGPU))
	for uuid := range perGPU {
		e, _, _ := inv.lookup(uuid)
		entries = append(entries, e)
	}
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i].gpu, entries[j].gpu
		if a.Index != b.Index {
			return a.Index < b.Index
		}
		return a.UUID < b.UUID
	})
	return entries
}

// shareEnvs is the reservation's environment: visible devices, per-GPU
// memory limits and compute fractions, the token and the sorted share IDs.
func shareEnvs(inv *inventory, entries []*gpuEntry, perGPU map[string]int, token string, sorted []string) map[string]string {
	var uuids, pinned, fractions, limits, computes []string
	threadPct := 100
	for ord, e := range entries {
		k := perGPU[e.gpu.UUID]
		limit := uint64(k) * e.memoryPerShare
		pct := max(k*100/e.shares, 1)
		threadPct = min(threadPct, pct)
		uuids = append(uuids, e.gpu.UUID)
		pinned = append(pinned, fmt.Sprintf("%d=%dM", ord, limit>>20))
		fractions = append(fractions, strconv.FormatFloat(float64(k)/float64(e.shares), 'f', 4, 64))
		limits = append(limits, strconv.FormatUint(limit, 10))
		computes = append(computes, strconv.Itoa(pct))
	}
	_, sys, _ := inv.lookup(entries[0].gpu.UUID)
	return map[string]string{
		EnvNvidiaVisibleDevices: strings.Join(uuids, ","),
		EnvCUDAVisibleDevices:   strings.Join(uuids, ","),
		EnvMPSPinnedMemLimit:    strings.Join(pinned, ","),
		EnvMPSActiveThreadPct:   strconv.Itoa(threadPct),
		EnvReservation:          token,
		EnvShareIDs:             strings.Join(sorted, ","),
		EnvMemoryFraction:       strings.Join(fractions, ","),
		EnvMemoryLimitBytes:     strings.Join(limits, ","),
		EnvComputePercent:       strings.Join(computes, ","),
		EnvBackend:              sys.Backend,
	}
}

// taskEnver is a backend with environment of its own for the tasks that
// reserve its GPUs: the simulated backend's state directory, whose
// occupancy files drive the trainer's MODELLED interference.
type taskEnver interface {
	TaskEnv() (env map[string]string, readOnlyDirs []string)
}

func newToken() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on Linux; keep tokens unique anyway.
		return fmt.Sprintf("r%x", time.Now().UnixNano())
	}
	return hex.EncodeToString(b[:])
}

// reservations remembers recent Reserve calls by token. Attribution does
// not depend on it (tasks carry their share IDs in their environment, so a
// restarted plugin still attributes them); it lets stats report reserved
// shares that have no GPU process yet.
type reservations struct {
	mu      sync.Mutex
	byToken map[string]*reservation
	order   []string
	// latest maps each share to its most recent reservation.
	latest map[string]*reservation
}

type reservation struct {
	token   string
	shares  []string
	created time.Time
}

func newReservations() *reservations {
	return &reservations{byToken: map[string]*reservation{}, latest: map[string]*reservation{}}
}

func (r *reservations) add(token string, shares []string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := &reservation{token: token, shares: shares, created: now}
	r.byToken[token] = res
	r.order = append(r.order, token)
	for _, id := range shares {
		r.latest[id] = res
	}
	if len(r.order) > maxReservationsRemembered {
		old := r.byToken[r.order[0]]
		delete(r.byToken, r.order[0])
		r.order = r.order[1:]
		for _, id := range old.shares {
			if r.latest[id] == old {
				delete(r.latest, id)
			}
		}
	}
}

// known reports whether token is a remembered reservation.
func (r *reservations) known(token string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.byToken[token]
	return ok
}

// forShare returns the most recent reservation of share id, if any.
func (r *reservations) forShare(id string) *reservation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latest[id]
}
