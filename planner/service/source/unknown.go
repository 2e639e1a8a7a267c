package source

import (
	"fmt"
	"sort"
	"strings"
)

// knownKeys are the caravan_* job meta keys the planner reads.
var knownKeys = []string{
	MetaEnabled, MetaWorkerGroup, MetaPSGroup, MetaMinWorkers, MetaMaxWorkers, MetaMinPS, MetaMaxPS,
	MetaGang, MetaTargetLoss, MetaConvergeDelta, MetaStopOnConverge, MetaPriority, MetaSuspendable,
	MetaTotalSteps, MetaKind, MetaSpeedModel, MetaGPUShares, MetaMaxRestarts, MetaResizeCost,
	MetaMinGPUShares, MetaMaxGPUShares, MetaRightsize, MetaPack,
}

// UnknownKeys returns a warning for each caravan_* meta key the planner does
// not know, sorted, with the nearest known key when it is a likely typo.
func UnknownKeys(meta map[string]string) []string {
	return unknownKeys(meta, "unknown meta key %q is ignored")
}

// unknownKeys formats each caravan_* key of meta the planner does not know
// with format (one %q, the key), adding the nearest known key when it is a
// likely typo; sorted.
func unknownKeys(meta map[string]string, format string) []string {
	var out []string
	for k := range meta {
		if !strings.HasPrefix(strings.ToLower(k), "caravan_") || isKnown(k) {
			continue
		}
		w := fmt.Sprintf(format, k)
		if near, ok := nearest(k); ok {
			w += fmt.Sprintf("; did you mean %q?", near)
		}
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}

func isKnown(k string) bool {
	for _, known := range knownKeys {
		if k == known {
			return true
		}
	}
	return false
}

// nearest is the known key closest to k by edit distance, if within a third
// of the length of its part after "caravan_" (at least 2): close enough to
// be a typo.
func nearest(k string) (string, bool) {
	best, bestD := "", -1
	for _, known := range knownKeys {
		if d := editDistance(strings.ToLower(k), known); bestD < 0 || d < bestD {
			best, bestD = known, d
		}
	}
	return best, bestD <= max(2, len(strings.TrimPrefix(best, "caravan_"))/3)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
