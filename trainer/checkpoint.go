package trainer

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/caravan-nomad/caravan/driver/protocol"
)

const (
	// StateFile holds the trainer's state inside the checkpoint directory.
	StateFile  = "trainer-state.bin"
	stateMagic = "CRVNTRN1"
)

// ErrFingerprint means a checkpoint belongs to a run with another Config.
var ErrFingerprint = errors.New("checkpoint was written by a run with a different configuration")

// State is what a checkpoint holds: everything the next step depends on.
type State struct {
	Step     uint64 // steps completed
	Sequence uint64 // marker sequence of the checkpoint this state came from
	Params   []float64
	Velocity []float64
}

// encodeState streams magic | fingerprint | step | n | params | velocity |
// sha256(all before) to w.
func encodeState(c Config, s *State, w io.Writer) error {
	h := sha256.New()
	mw := io.MultiWriter(w, h)
	fp := c.Fingerprint()
	head := make([]byte, 0, len(stateMagic)+32+16)
	head = append(head, stateMagic...)
	head = append(head, fp[:]...)
	head = binary.LittleEndian.AppendUint64(head, s.Step)
	head = binary.LittleEndian.AppendUint64(head, uint64(len(s.Params)))
	if _, err := mw.Write(head); err != nil {
		return err
	}
	buf := make([]byte, 0, 64<<10)
	for _, v := range [][]float64{s.Params, s.Velocity} {
		for _, f := range v {
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(f))
			if len(buf) == cap(buf) {
				if _, err := mw.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
	}
	if _, err := mw.Write(buf); err != nil {
		return err
	}
	_, err := w.Write(h.Sum(nil))
	return err
}

func decodeState(c Config, data []byte) (*State, error) {
	const head = len(stateMagic) + 32 + 8 + 8
	if len(data) < head+32 || string(data[:len(stateMagic)]) != stateMagic {
		return nil, errors.New("not a caravan trainer state file")
	}
	body, sum := data[:len(data)-32], data[len(data)-32:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, errors.New("state file checksum mismatch")
	}
	fp := c.Fingerprint()
	if !bytes.Equal(body[len(stateMagic):len(stateMagic)+32], fp[:]) {
		return nil, ErrFingerprint
	}
	r := body[len(stateMagic)+32:]
	step := binary.LittleEndian.Uint64(r[0:8])
	n := binary.LittleEndian.Uint64(r[8:16])
	r = r[16:]
	if uint64(len(r)) != 16*n {
		return nil, fmt.Errorf("state file holds %d bytes of parameters, want %d", len(r), 16*n)
	}
	s := &State{Step: step, Params: make([]float64, n), Velocity: make([]float64, n)}
	for i := range s.Params {
		s.Params[i] = math.Float64frombits(binary.LittleEndian.Uint64(r[8*i:]))
		s.Velocity[i] = math.Float64frombits(binary.LittleEndian.Uint64(r[8*(int(n)+i):]))
	}
	return s, nil
}

// LoadCheckpoint reads the checkpoint in dir. It returns (nil, nil) when the
// directory holds none (no marker), and an error when it holds one that is
// unusable: a task must not silently start over.
func LoadCheckpoint(c Config, dir string) (*State, error) {
	m, err := protocol.ReadMarker(dir)
	if errors.Is(err, protocol.ErrNoMarker) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint marker %d present but %s missing", m.Sequence, StateFile)
	}
	if err != nil {
		return nil, err
	}
	s, err := decodeState(c, data)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %d: %w", m.Sequence, err)
	}
	s.Sequence = m.Sequence
	return s, nil
}

// SaveCheckpoint writes the state file, then the marker with sequence seq:
// the protocol's order, so a marker never points at a torn state file.
func SaveCheckpoint(c Config, dir string, s *State, seq uint64, paramsHash string) error {
	if err := protocol.WriteAtomic(filepath.Join(dir, StateFile), func(w io.Writer) error { return encodeState(c, s, w) }); err != nil {
		return fmt.Errorf("write %s: %w", StateFile, err)
	}
	step := s.Step
	return protocol.WriteMarker(dir, &protocol.Marker{
		Sequence: seq,
		Step:     &step,
		Meta: map[string]string{
			"trainer_params_sha256": paramsHash,
			"trainer_steps_total":   strconv.FormatUint(c.Steps, 10),
		},
	})
}
