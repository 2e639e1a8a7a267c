package driver

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/hashicorp/nomad/plugins/drivers"
)

// errMount is the error of a mount the driver cannot honour.
var errMount = errors.New("the caravan driver has no filesystem isolation and cannot mount volumes")

// checkMounts accepts only mounts the task already has without isolation:
// a host path offered at that same path, as a device plugin's reservation
// does for the MPS pipe and log directories. A task process sees the
// host's filesystem, so such a mount is already in place; any other mount
// (a volume, a host path at another task path, a read-only one, which the
// task would find writable) is refused, naming it.
func checkMounts(mounts []*drivers.MountConfig) error {
	for _, m := range mounts {
		if m == nil {
			continue
		}
		if !filepath.IsAbs(m.TaskPath) || filepath.Clean(m.TaskPath) != filepath.Clean(m.HostPath) {
			return fmt.Errorf("%w: mount of %q at %q", errMount, m.HostPath, m.TaskPath)
		}
		if m.Readonly {
			// Without isolation the task would find the path writable.
			return fmt.Errorf("%w: read-only mount of %q (the task would see it writable)", errMount, m.HostPath)
		}
	}
	return nil
}
