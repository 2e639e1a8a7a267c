package interference

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// EnvStateDir names, in a task's environment, the simulated device
// backend's state directory, where it keeps one occupancy file per GPU
// (SIMULATED GPUs only; a real GPU has none).
const EnvStateDir = "CARAVAN_SIMULATED_GPU_STATE_DIR"

// maxFileSize bounds an occupancy file a trainer reads.
const maxFileSize = 1 << 20

// Occupancy is who holds one SIMULATED GPU: the file the simulated backend
// keeps, so that a trainer's MODELLED compute can slow down by the model.
type Occupancy struct {
	// Simulated is always true: the file exists for simulated GPUs only.
	Simulated bool   `json:"simulated"`
	GPU       string `json:"gpu"`
	// MPS says whether tasks get the MPS environment (the plugin's `mps`
	// attribute), which the model treats as an MPS GPU.
	MPS     bool      `json:"mps"`
	Updated time.Time `json:"updated"`
	Holders []Holder  `json:"holders"`
}

// Holder is one reservation with a live process on the GPU.
type Holder struct {
	Reservation string `json:"reservation"`
	PID         int    `json:"pid"`
	// Shares is the number of the GPU's shares the reservation holds, and
	// Fraction their part of the GPU (0 when the task's env does not say).
	Shares   int     `json:"shares"`
	Fraction float64 `json:"fraction"`
	// SMPercent is the task's GPU use (its profile): what it states, else
	// what the GPU reports for a process by default; nil when unknown (the
	// model then counts the holder as GPU-bound).
	SMPercent *uint32 `json:"sm_percent,omitempty"`
}

// Path is the occupancy file of gpu in dir.
func Path(dir, gpu string) string {
	return filepath.Join(dir, "occupancy-"+safeName(gpu)+".json")
}

// safeName keeps a UUID a single path element.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == '\\' {
			return '_'
		}
		return r
	}, s)
}

// WriteFile writes o to Path(dir, o.GPU) atomically (a temporary file and a
// rename): a reader sees the old occupancy or the new one, never a mix.
func WriteFile(dir string, o *Occupancy) error {
	b, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return err
	}
	path := Path(dir, o.GPU)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadFile reads gpu's occupancy file in dir; fs.ErrNotExist when there is
// none.
func ReadFile(dir, gpu string) (*Occupancy, error) {
	path := Path(dir, gpu)
	info, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if info.Size() > maxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxFileSize)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var o Occupancy
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if o.GPU != gpu {
		return nil, errors.New(path + ": names GPU " + o.GPU + ", not " + gpu)
	}
	return &o, nil
}
