package device

import (
	"strconv"
	"strings"

	"github.com/caravan-nomad/caravan/device/nvml"
)

// shareSep joins a GPU (or MIG instance) UUID and a share index into a
// share instance ID: "GPU-8f3c...-share-2". IDs depend only on the UUID and
// the index, so they are stable across plugin and node restarts.
const shareSep = "-share-"

func shareID(uuid string, i int) string {
	return uuid + shareSep + strconv.Itoa(i)
}

// parseShareID splits a share ID into its GPU UUID and share index.
func parseShareID(id string) (uuid string, index int, ok bool) {
	i := strings.LastIndex(id, shareSep)
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(id[i+len(shareSep):])
	if err != nil || n < 0 {
		return "", 0, false
	}
	return id[:i], n, true
}

// sharesFor is the share count of g: the most specific matching override
// (uuid, then index, then model; the last of equal rank wins), else the
// default.
func (s *settings) sharesFor(g nvml.GPU) int {
	if o := s.overrideFor(g); o != nil {
		return o.shares
	}
	return s.shares
}

// overrideFor is the override that sets g's share count, or nil.
func (s *settings) overrideFor(g nvml.GPU) *override {
	var best *override
	rank := -1
	for i := range s.overrides {
		o := &s.overrides[i]
		if !o.matches(g) {
			continue
		}
		r := 0
		switch o.kind {
		case selectUUID:
			r = 2
		case selectIndex:
			r = 1
		}
		if r >= rank {
			best, rank = o, r
		}
	}
	return best
}

// boundedShares is sharesFor(g) bounded by g's memory, so that a share
// stands for at least minShareBytes (and a GPU reporting less has one
// share). clamped is the configured count when it was lowered, else 0.
func (s *settings) boundedShares(g nvml.GPU) (n, clamped int) {
	n = s.sharesFor(g)
	limit := max(g.MemoryBytes/minShareBytes, 1)
	if uint64(n) > limit {
		return int(limit), n
	}
	return n, 0
}

// matches reports whether the override selects g. An index selects a GPU
// and its MIG instances; a model matches the GPU model or a MIG profile.
func (o override) matches(g nvml.GPU) bool {
	switch o.kind {
	case selectUUID:
		return g.UUID == o.value
	case selectIndex:
		return g.Index == o.index
	default:
		return g.Model == o.value || (g.MIG && g.MIGProfile == o.value)
	}
}
