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

// MaxOrderValue bounds MetaStep and MetaSequence: 2^53-1, the largest
// integer every JSON implementation reads exactly. The driver's checkpoint
// protocol refuses markers above it (protocol.MaxStep, MaxSequence).
const MaxOrderValue = 1<<53 - 1

// Position is where a checkpoint stands in its training: step, then
// sequence.
type Position struct {
	step, seq       uint64
	hasStep, hasSeq bool
}

// PositionOf reads the ordering fields of meta. A value that is not a
// decimal integer within 0..MaxOrderValue orders nothing: a generation
// written before the bounds existed, with such a value, cannot hold the key's
// later commits back.
func PositionOf(meta map[string]string) Position {
	var p Position
	p.step, p.hasStep = orderValue(meta, MetaStep)
	p.seq, p.hasSeq = orderValue(meta, MetaSequence)
	return p
}

// HasSequence reports whether p has a sequence: without one a checkpoint
// is unordered.
func (p Position) HasSequence() bool { return p.hasSeq }

func orderValue(meta map[string]string, key string) (uint64, bool) {
	n, err := strconv.ParseUint(meta[key], 10, 64)
	return n, err == nil && n <= MaxOrderValue
}

// CheckOrderMeta refuses a commit whose ordering meta is present but not a
// decimal integer within 0..MaxOrderValue: the store orders only by values
// it can compare.
func CheckOrderMeta(meta map[string]string) error {
	var errs []error
	for _, k := range []string{MetaStep, MetaSequence} {
		v, ok := meta[k]
		if !ok {
			continue
		}
		if _, ok := orderValue(meta, k); !ok {
			errs = append(errs, fmt.Errorf("%w: meta %s: %q is not a decimal integer within 0..%d",
				ErrInvalid, k, v, uint64(MaxOrderValue)))
		}
	}
	return errors.Join(errs...)
}

// OlderThan reports whether p is strictly older than q: a lower step, or the
// same step with a lower sequence; without steps on both sides, a lower
// sequence. Checkpoints without a sequence are unordered (never older).
func (p Position) OlderThan(q Position) bool {
	if !p.hasSeq || !q.hasSeq {
		return false
	}
	if p.hasStep && q.hasStep && p.step != q.step {
		return p.step < q.step
	}
	return p.seq < q.seq
}

func (p Position) String() string {
	if p.hasStep {
		return fmt.Sprintf("step %d, sequence %d", p.step, p.seq)
	}
	return fmt.Sprintf("sequence %d", p.seq)
}

// checkNotStale refuses meta whose ordering fields are malformed, and meta
// older than the newest readable generation of
// gens (ascending) in keyDir. The caller holds the key lock, so no
// generation can be published between this check and the commit's own.
func checkNotStale(keyDir string, gens []uint64, meta map[string]string) error {
	if err := CheckOrderMeta(meta); err != nil {
		return err
	}
	p := PositionOf(meta)
	if !p.hasSeq {
		return nil
	}
	for _, g := range slices.Backward(gens) {
		m, err := readManifest(keyDir, g)
		switch {
		case err == nil:
			if q := PositionOf(m.Meta); p.OlderThan(q) {
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
