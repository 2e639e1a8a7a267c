// Package protocol is caravan's checkpoint protocol between the task driver
// and a training process: the environment the driver sets, the marker file
// the task writes when a checkpoint is complete, and helpers to read and
// write that marker atomically. It has no dependencies beyond the standard
// library so training programs can import it without the Nomad SDK.
//
// The protocol, from the task's side:
//
//  1. On start, CARAVAN_CHECKPOINT_DIR names a directory. If the driver
//     restored a checkpoint it is already there (files plus the marker), and
//     CARAVAN_CHECKPOINT_GENERATION / _SEQUENCE / _STEP say which.
//  2. When the task receives the signal named in CARAVAN_CHECKPOINT_SIGNAL,
//     it writes its state into the directory, then writes the marker file
//     (MarkerName) atomically with a sequence number greater than any it
//     wrote or restored before. It must not touch the directory again until
//     the next signal.
//  3. The driver sees the new sequence, commits the directory to the
//     checkpoint store, and emits a task event.
//
// A task that holds no state of its own answers the signal with a skip
// marker instead: {"sequence": N, "skip": true}, N again greater than any
// sequence it wrote or restored (CARAVAN_CHECKPOINT_SEQUENCE is the floor).
// It means "acknowledged, nothing to commit from this task; another member
// of the group writes the state": the driver commits nothing, emits no
// failure, and a stop proceeds at once. Non-writer ranks of a data-parallel
// group (checkpoint scope "group": workers without state, PyTorch ranks
// other than 0, parameter servers that do not write the full state) use it.
package protocol

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

const (
	// EnvDir is the checkpoint directory the task reads from and writes to.
	EnvDir = "CARAVAN_CHECKPOINT_DIR"
	// EnvSignal is the name of the signal (e.g. "SIGUSR1") that asks the
	// task to checkpoint.
	EnvSignal = "CARAVAN_CHECKPOINT_SIGNAL"
	// EnvGeneration is the store generation restored into EnvDir ("0" when
	// the task starts fresh).
	EnvGeneration = "CARAVAN_CHECKPOINT_GENERATION"
	// EnvSequence is the marker sequence restored into EnvDir ("0" when
	// fresh); the next marker must use a greater one.
	EnvSequence = "CARAVAN_CHECKPOINT_SEQUENCE"
	// EnvStep is the training step the restored marker reported, if any.
	EnvStep = "CARAVAN_CHECKPOINT_STEP"
	// EnvRestoredFrom is the node that wrote the restored checkpoint.
	EnvRestoredFrom = "CARAVAN_CHECKPOINT_RESTORED_FROM"

	// MarkerName is the marker file inside the checkpoint directory. Its
	// presence with a new sequence means "the files beside me are complete".
	MarkerName = "caravan-checkpoint.json"
)

var (
	// ErrNoMarker means the directory holds no marker file.
	ErrNoMarker = errors.New("no checkpoint marker")
	// ErrNotRegular means the marker is not a regular file (a symlink, a
	// FIFO, a device, a directory): it is refused without being read.
	ErrNotRegular = errors.New("checkpoint marker is not a regular file")
	// ErrTooLarge means the marker is larger than MaxMarkerSize.
	ErrTooLarge = errors.New("checkpoint marker too large")
)

// Marker is the content of MarkerName.
type Marker struct {
	// Sequence increases with every checkpoint the task writes; the driver
	// commits a marker only when its sequence is greater than the last one
	// it committed or restored.
	Sequence uint64 `json:"sequence"`
	// Step is the training step the checkpoint holds (optional, shown in
	// events and passed back as CARAVAN_CHECKPOINT_STEP on resume). With
	// Sequence it orders the checkpoints of a key.
	Step *uint64 `json:"step,omitempty"`
	// Meta is free-form metadata stored with the checkpoint's manifest. It
	// never orders checkpoints: the driver's own keys (step, sequence,
	// alloc_id, reason) replace any the task sets.
	Meta map[string]string `json:"meta,omitempty"`
	// Skip acknowledges a checkpoint request with nothing to commit from
	// this task (another member of the group writes the state). The
	// driver commits nothing for a skip marker.
	Skip bool `json:"skip,omitempty"`
}

// MaxSequence and MaxStep bound a marker's sequence and step, the only
// fields that order a key's checkpoints. 2^53-1 is the largest integer every
// JSON implementation reads exactly (JavaScript's Number.MAX_SAFE_INTEGER, a
// float64's integers): a million steps a second reach it in 285 years, so a
// larger value is a bug or an attack, and would leave the key's every later
// checkpoint refused as stale.
const (
	MaxSequence = 1<<53 - 1
	MaxStep     = 1<<53 - 1
)

// Validate reports a marker the driver must not commit: a sequence outside
// 1..MaxSequence, a step above MaxStep. Errors name the field.
func (m *Marker) Validate() error {
	var errs []error
	if m.Sequence == 0 {
		errs = append(errs, errors.New("sequence: must be greater than 0"))
	}
	if m.Sequence > MaxSequence {
		errs = append(errs, fmt.Errorf("sequence: %d is above the largest allowed, %d", m.Sequence, uint64(MaxSequence)))
	}
	if m.Step != nil && *m.Step > MaxStep {
		errs = append(errs, fmt.Errorf("step: %d is above the largest allowed, %d", *m.Step, uint64(MaxStep)))
	}
	return errors.Join(errs...)
}

// MaxMarkerSize is the largest marker ReadMarker accepts. A marker is a
// small JSON object; anything bigger is refused unread.
const MaxMarkerSize = 64 << 10

// ReadMarker reads and validates the marker in dir. It returns ErrNoMarker
// (wrapped) when there is none.
func ReadMarker(dir string) (*Marker, error) {
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNoMarker, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint marker: %w", err)
	}
	defer root.Close()
	return ReadMarkerIn(root)
}

// ReadMarkerIn reads and validates the marker in the directory root. The
// marker must be a regular file of at most MaxMarkerSize bytes: it is opened
// without following a symlink and without blocking (a FIFO or device is
// refused, never read), so a task cannot make its reader hang, read a host
// file through a link, or hold a huge file in memory.
func ReadMarkerIn(root *os.Root) (*Marker, error) {
	b, err := readRegular(root, MarkerName, MaxMarkerSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNoMarker, root.Name())
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint marker %s: %w", filepath.Join(root.Name(), MarkerName), err)
	}
	return ParseMarker(b)
}

// ParseMarker decodes and validates a marker's bytes.
func ParseMarker(b []byte) (*Marker, error) {
	if len(b) > MaxMarkerSize {
		return nil, fmt.Errorf("checkpoint marker: %d bytes, more than %d", len(b), MaxMarkerSize)
	}
	var m Marker
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("parse checkpoint marker: %w", err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("checkpoint marker: %w", err)
	}
	return &m, nil
}

// readRegular reads the regular file name in root, refusing anything else
// (symlinks included) and files above limit bytes, without blocking on
// FIFOs or devices.
func readRegular(root *os.Root, name string, limit int64) ([]byte, error) {
	// os.Root follows a final symlink that stays inside; lstat first and
	// check the file opened is the one lstat saw, so a link swapped in
	// between is refused too.
	li, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !li.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: is a %s", ErrNotRegular, li.Mode().Type())
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || !os.SameFile(li, fi) {
		return nil, fmt.Errorf("%w: replaced while read", ErrNotRegular)
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrTooLarge, fi.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: grew past %d bytes while read", ErrTooLarge, limit)
	}
	return b, nil
}

// WriteMarker writes m into dir atomically: a temporary file is written and
// fsynced, renamed over MarkerName, and the directory is fsynced. Call it
// only after every checkpoint file is written and closed.
func WriteMarker(dir string, m *Marker) error {
	if err := m.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(dir, MarkerName), b)
}

// WriteFileAtomic writes data to path through a fsynced temporary file and a
// rename, so readers see the old content or the new one, never a torn file.
func WriteFileAtomic(path string, data []byte) error {
	return WriteAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteAtomic is WriteFileAtomic for content streamed by write, so a large
// checkpoint never has to be held in memory whole.
func WriteAtomic(path string, write func(w io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Restored is what the driver tells a task about the checkpoint it restored,
// read back from the environment.
type Restored struct {
	Dir        string
	Signal     string
	Generation uint64
	Sequence   uint64
	Step       *uint64
	FromNode   string
}

// FromEnv reads the protocol environment. Dir is empty when the task does
// not run under a checkpointing driver.
func FromEnv(getenv func(string) string) (*Restored, error) {
	r := &Restored{Dir: getenv(EnvDir), Signal: getenv(EnvSignal), FromNode: getenv(EnvRestoredFrom)}
	var err error
	if r.Generation, err = parseUint(getenv, EnvGeneration); err != nil {
		return nil, err
	}
	if r.Sequence, err = parseUint(getenv, EnvSequence); err != nil {
		return nil, err
	}
	if v := getenv(EnvStep); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", EnvStep, v, err)
		}
		r.Step = &s
	}
	return r, nil
}

func parseUint(getenv func(string) string, name string) (uint64, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", name, v, err)
	}
	return n, nil
}
