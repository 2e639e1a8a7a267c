package driver

import (
	"testing"

	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/helper/pointer"
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

// TestCheckpointMountOver: a main task mounting anything at its checkpoint
// directory, above it or inside it is refused, naming the mount; mounts
// beside it are fine.
func TestCheckpointMountOver(t *testing.T) {
	docker := func(config map[string]any) *api.Task {
		return &api.Task{Name: "trainer", Driver: "docker", Config: config}
	}
	cases := []struct {
		name string
		task *api.Task
		want string // "" = accepted
	}{
		{"no mounts", docker(map[string]any{"image": "x"}), ""},
		{"bind over it", docker(map[string]any{"volumes": []any{"local/ckpt-bind:/alloc/checkpoint"}}),
			`task "trainer" has volumes entry "local/ckpt-bind:/alloc/checkpoint" at /alloc/checkpoint, over its checkpoint directory /alloc/checkpoint`},
		{"read-only option", docker(map[string]any{"volumes": []string{"/data:/alloc/checkpoint/:ro"}}), `volumes entry "/data:/alloc/checkpoint/:ro"`},
		{"interpolated", docker(map[string]any{"volumes": []any{"x:${NOMAD_ALLOC_DIR}/checkpoint"}}), `volumes entry "x:${NOMAD_ALLOC_DIR}/checkpoint"`},
		{"over /alloc", docker(map[string]any{"volumes": []any{"x:/alloc"}}), "at /alloc, over"},
		{"inside it", docker(map[string]any{"volumes": []any{"x:/alloc/checkpoint/shards"}}), "at /alloc/checkpoint/shards"},
		{"beside it", docker(map[string]any{"volumes": []any{"x:/alloc/data", "y:/alloc/checkpoint2", "z:/data"}}), ""},
		{"mount block", docker(map[string]any{"mount": []map[string]any{{"type": "bind", "source": "ckpt", "target": "/alloc/checkpoint"}}}),
			`mount block (source "ckpt") at /alloc/checkpoint`},
		{"mount block from the API", docker(map[string]any{"mount": []any{map[string]any{"type": "volume", "target": "/alloc/checkpoint"}}}),
			`mount block (source "")`},
		{"volume_mount", &api.Task{Name: "trainer", Driver: "exec", VolumeMounts: []*api.VolumeMount{
			{Volume: pointer.Of("scratch"), Destination: pointer.Of("/alloc/checkpoint")}}},
			`volume_mount of volume "scratch" at /alloc/checkpoint`},
		{"host driver's config is not a mount", &api.Task{Name: "trainer", Driver: "raw_exec",
			Config: map[string]any{"volumes": []any{"x:/alloc/checkpoint"}}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkpointMountOver(c.task, "checkpoint")
			if c.want == "" {
				must.NoError(t, err)
				return
			}
			must.ErrorIs(t, err, errCheckpointMount)
			must.StrContains(t, err.Error(), "checkpoint.dir: ")
			must.StrContains(t, err.Error(), c.want)
		})
	}
}

// TestDriver_RoleRefusesMountOverCheckpointDir: a container that would save
// into a volume mounted over alloc/checkpoint fails its restore before it
// starts and its commit, each naming the volume: the commit never says "No
// new checkpoint" for a checkpoint it cannot see.
func TestDriver_RoleRefusesMountOverCheckpointDir(t *testing.T) {
	td := newTestDriver(t, t.TempDir())
	td.nomad.job.Store(ownerRoleJob(&api.Task{Name: "trainer", Driver: "docker",
		Config: map[string]any{"image": "app:1", "volumes": []any{"local/ckpt-bind:/alloc/checkpoint"}}}))
	want := `task "trainer" has volumes entry "local/ckpt-bind:/alloc/checkpoint" at /alloc/checkpoint, over its checkpoint directory`

	restore := newTask(t, td, "client1", roleTask(RoleRestore))
	_, _, err := td.StartTask(restore)
	must.ErrorContains(t, err, want)

	commit := sameAllocTask(t, restore, "commit", roleTask(RoleCommit))
	_, _, err = td.StartTask(commit)
	must.ErrorContains(t, err, want)
	for len(td.events) > 0 {
		ev := <-td.events
		must.StrNotContains(t, ev.Message, "No new checkpoint")
	}
}
