package driver

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/hashicorp/nomad/api"
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

// errCheckpointMount is the error of a main task that mounts something over
// (or above, or inside) its checkpoint directory.
var errCheckpointMount = errors.New("a mount covers the checkpoint directory")

// containerAllocDir is where the allocation's shared directory is in a
// container, and the task paths Nomad's variables stand for there.
const containerAllocDir = "/alloc"

var taskPathVars = strings.NewReplacer(
	"${NOMAD_ALLOC_DIR}", "/alloc", "${NOMAD_TASK_DIR}", "/local", "${NOMAD_SECRETS_DIR}", "/secrets")

// taskMount is one mount of a task, as its jobspec gives it.
type taskMount struct {
	what   string // for errors: `volumes entry "a:/b"`
	target string // path in the task
}

// checkpointMountOver refuses a main task (the target of a role task with
// checkpoint.dir dir) that mounts anything at /alloc/<dir>, above it or
// inside it: the task would save into the mount, the commit would find the
// allocation's directory without the checkpoint and report none, and the
// next start would begin again at step 0. Mounts are the task's
// volume_mount blocks and, for the docker and podman drivers, the
// config's volumes and mount(s) entries.
func checkpointMountOver(task *api.Task, dir string) error {
	ckpt := path.Join(containerAllocDir, dir)
	for _, m := range mountsOf(task) {
		t := taskPathVars.Replace(m.target)
		if !path.IsAbs(t) {
			t = "/" + t
		}
		t = path.Clean(t)
		if t == ckpt || t == "/" || strings.HasPrefix(ckpt, t+"/") || strings.HasPrefix(t, ckpt+"/") {
			return fmt.Errorf("checkpoint.dir: %w: task %q has %s at %s, over its checkpoint directory %s: "+
				"it would save into that mount, which the commit never sees, and every checkpoint would be lost; "+
				"mount it elsewhere, or choose a checkpoint.dir no mount covers",
				errCheckpointMount, task.Name, m.what, t, ckpt)
		}
	}
	return nil
}

// mountsOf lists task's mounts.
func mountsOf(task *api.Task) []taskMount {
	var out []taskMount
	for _, vm := range task.VolumeMounts {
		if vm == nil || vm.Destination == nil {
			continue
		}
		name := ""
		if vm.Volume != nil {
			name = *vm.Volume
		}
		out = append(out, taskMount{fmt.Sprintf("volume_mount of volume %q", name), *vm.Destination})
	}
	if _, container := containerDrivers[task.Driver]; !container {
		return out
	}
	for _, v := range anyList(task.Config["volumes"]) {
		{
			s, _ := v.(string)
			if parts := strings.Split(s, ":"); len(parts) >= 2 {
				out = append(out, taskMount{fmt.Sprintf("volumes entry %q", s), parts[1]})
			}
		}
	}
	for _, key := range []string{"mount", "mounts"} {
		for _, v := range anyList(task.Config[key]) {
			m, _ := v.(map[string]any)
			target, _ := m["target"].(string)
			if target == "" {
				continue
			}
			source, _ := m["source"].(string)
			out = append(out, taskMount{fmt.Sprintf("%s block (source %q)", key, source), target})
		}
	}
	return out
}

// anyList is a config value as a list: a JSON-decoded job's []any, or a
// jobspec parser's []string, []map[string]any or single map.
func anyList(v any) []any {
	switch l := v.(type) {
	case []any:
		return l
	case []string:
		out := make([]any, len(l))
		for i, s := range l {
			out[i] = s
		}
		return out
	case []map[string]any:
		out := make([]any, len(l))
		for i, m := range l {
			out[i] = m
		}
		return out
	case map[string]any:
		return []any{l}
	}
	return nil
}
