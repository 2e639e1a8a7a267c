package store

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
)

// Manifest meta keys the store orders generations by. A commit whose meta
// carries them is refused with ErrStale when it is older than the key's
// newest generation (see Commit).
const (
	// MetaStep is the training step a checkpoint holds (decimal).
	MetaStep = "step"
	// MetaSequence is the checkpoint's marker sequence (decimal).
	MetaSequence = "sequence"
)

// ErrStale is returned by Commit for a checkpoint older than the key's
// newest generation: it is never published over it.
var ErrStale = errors.New("stale checkpoint")

// position is where a checkpoint stands in its training: step, then
// sequence.
type position struct {
	step, seq       uint64
	hasStep, hasSeq bool
}

func positionOf(meta map[string]string) position {
	var p position
	if n, err := strconv.ParseUint(meta[MetaStep], 10, 64); err == nil {
		p.step, p.hasStep = n, true
	}
	if n, err := strconv.ParseUint(meta[MetaSequence], 10, 64); err == nil {
		p.seq, p.hasSeq = n, true
	}
	return p
}

// olderThan reports whether p is strictly older than q: a lower step, or the
// same step with a lower sequence; without steps on both sides, a lower
// sequence. Checkpoints without a sequence are unordered (never older).
func (p position) olderThan(q position) bool {
	if !p.hasSeq || !q.hasSeq {
		return false
	}
	if p.hasStep && q.hasStep && p.step != q.step {
		return p.step < q.step
	}
	return p.seq < q.seq
}

func (p position) String() string {
	if p.hasStep {
		return fmt.Sprintf("step %d, sequence %d", p.step, p.seq)
	}
	return fmt.Sprintf("sequence %d", p.seq)
}

// checkNotStale refuses meta older than the newest readable generation of
// gens (ascending) in keyDir. The caller holds the key lock, so no
// generation can be published between this check and the commit's own.
func checkNotStale(keyDir string, gens []uint64, meta map[string]string) error {
	p := positionOf(meta)
	if !p.hasSeq {
		return nil
	}
	for _, g := range slices.Backward(gens) {
		m, err := readManifest(keyDir, g)
		switch {
		case err == nil:
			if q := positionOf(m.Meta); p.olderThan(q) {
				return fmt.Errorf("%w: %s is older than generation %d (%s)", ErrStale, p, g, q)
			}
			return nil
		case errors.Is(err, ErrCorrupt), errors.Is(err, fs.ErrNotExist):
			continue // an unreadable generation orders nothing
		default:
			return err
		}
	}
	return nil
}
