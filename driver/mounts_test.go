package driver

import (
	"testing"

	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"
)

// TestCheckMounts: a device plugin's identity mounts (the GPU plugin's MPS
// directories, host path = task path) are already visible to a task
// without filesystem isolation and are accepted; a volume at another path
// or read-only (it would be writable) is refused, naming it.
func TestCheckMounts(t *testing.T) {
	mps := []*drivers.MountConfig{
		{TaskPath: "/run/mps/pipe", HostPath: "/run/mps/pipe"},
		{TaskPath: "/run/mps/log", HostPath: "/run/mps/log"},
	}
	for _, tc := range []struct {
		name   string
		mounts []*drivers.MountConfig
		err    string
	}{
		{"none", nil, ""},
		{"device identity mounts", mps, ""},
		{"volume elsewhere", append(mps, &drivers.MountConfig{TaskPath: "/data", HostPath: "/srv/vol"}), `host "/srv/vol" at task path "/data"`},
		{"read-only identity", []*drivers.MountConfig{{TaskPath: "/srv/ro", HostPath: "/srv/ro", Readonly: true}}, `host "/srv/ro" at task path "/srv/ro" read-only`},
		{"nil", []*drivers.MountConfig{nil}, "an empty mount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkMounts(tc.mounts)
			if tc.err == "" {
				must.NoError(t, err)
				return
			}
			must.ErrorContains(t, err, "cannot mount volumes")
			must.ErrorContains(t, err, tc.err)
		})
	}
}
