//go:build !linux

package nvml

// New reports ErrLibraryNotFound: caravan reads NVML on Linux only.
func New() (Client, error) {
	return nil, ErrLibraryNotFound
}
