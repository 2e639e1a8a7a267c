package driver

import (
	"fmt"

	"github.com/hashicorp/nomad/plugins/drivers"
)

// checkMounts refuses mounts the driver cannot honour: it has no filesystem
// isolation, so a task sees the host's paths. A mount of a host path at the
// same path (a device plugin's, such as the GPU plugin's MPS pipe and log
// directories) is already in place; any other would be silently missing,
// and a read-only one would be silently writable.
func checkMounts(mounts []*drivers.MountConfig) error {
	for _, m := range mounts {
		if m == nil || m.TaskPath != m.HostPath || m.Readonly {
			return fmt.Errorf("the caravan driver has no filesystem isolation and cannot mount volumes: %s", describeMount(m))
		}
	}
	return nil
}

func describeMount(m *drivers.MountConfig) string {
	if m == nil {
		return "an empty mount"
	}
	ro := ""
	if m.Readonly {
		ro = " read-only"
	}
	return fmt.Sprintf("host %q at task path %q%s", m.HostPath, m.TaskPath, ro)
}
