//go:build linux && cgo

package nvml

import gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

// New loads the host's libnvidia-ml and returns a Client over it, or
// ErrLibraryNotFound when the host has none.
func New() (Client, error) {
	a, err := NewAdapter(gonvml.New())
	if err != nil {
		return nil, err
	}
	return a, nil
}
