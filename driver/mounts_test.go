package driver

import (
	"testing"

	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/shoenig/test/must"
)

// TestCheckMounts: the MPS directories a device reservation mounts at their
// own paths start the task (with MPS on, every GPU task failed with "cannot
// mount volumes"); a volume or a host path at another task path is refused.
func TestCheckMounts(t *testing.T) {
	cases := []struct {
		name   string
		mounts []*drivers.MountConfig
		ok     bool
	}{
		{"none", nil, true},
		{"mps dirs at their own paths", []*drivers.MountConfig{
			{TaskPath: "/run/caravan/mps/pipe", HostPath: "/run/caravan/mps/pipe"},
			{TaskPath: "/run/caravan/mps/log/", HostPath: "/run/caravan/mps/log"},
		}, true},
		{"host path elsewhere", []*drivers.MountConfig{{TaskPath: "/data", HostPath: "/srv/data"}}, false},
		{"volume at a relative task path", []*drivers.MountConfig{{TaskPath: "data", HostPath: "data"}}, false},
		{"read-only at its own path", []*drivers.MountConfig{{TaskPath: "/srv/ro", HostPath: "/srv/ro", Readonly: true}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkMounts(tc.mounts)
			if tc.ok {
				must.NoError(t, err)
				return
			}
			must.ErrorIs(t, err, errMount)
		})
	}
}

// TestDriver_StartsWithDeviceMounts: a task whose device reservation mounts
// directories at their own host paths starts and runs.
func TestDriver_StartsWithDeviceMounts(t *testing.T) {
	td := newTestDriver(t, "")
	cfg := newTask(t, td, "client1", &TaskConfig{Command: "/bin/sh", Args: []string{"-c", "exit 0"}})
	dir := t.TempDir()
	cfg.Mounts = []*drivers.MountConfig{{TaskPath: dir, HostPath: dir}}
	_, _, err := td.StartTask(cfg)
	must.NoError(t, err)
	must.Eq(t, 0, td.waitExit(t, cfg.ID).ExitCode)

	other := newTask(t, td, "client1", &TaskConfig{Command: "/bin/sh", Args: []string{"-c", "exit 0"}})
	other.Mounts = []*drivers.MountConfig{{TaskPath: "/data", HostPath: dir}}
	_, _, err = td.StartTask(other)
	must.ErrorContains(t, err, "cannot mount volumes")
}
