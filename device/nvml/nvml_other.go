//go:build !linux || !cgo

package nvml

import "fmt"

// New reports ErrLibraryNotFound: caravan reads NVML on Linux only, and
// only in a build with cgo (go-nvml loads libnvidia-ml through dlopen from
// C). A CGO_ENABLED=0 build (make dist's arm64 build without a cross C
// compiler) advertises no GPUs with the nvml backend; the simulated
// backend works everywhere.
func New() (Client, error) {
	return nil, fmt.Errorf("%w: this caravan build has no NVML support (linux with cgo only)", ErrLibraryNotFound)
}
