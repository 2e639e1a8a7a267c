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
	best, rank := s.shares, -1
	for _, o := range s.overrides {
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
			best, rank = o.shares, r
		}
	}
	return best
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
