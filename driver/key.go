package driver

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/caravan-nomad/caravan/driver/store"
)

// checkpointKey is the store key of a task: namespace/job/group/task/index,
// so a replacement allocation (same name index, on any node) finds its
// predecessor's checkpoints. The index comes from NOMAD_ALLOC_INDEX, or is
// parsed from NOMAD_ALLOC_NAME ("job.group[3]"). The store escapes every
// part, so no job ID can leave its directory.
func checkpointKey(cfg *drivers.TaskConfig) (store.Key, error) {
	ns := cfg.Namespace
	if ns == "" {
		ns = cfg.Env["NOMAD_NAMESPACE"]
	}
	if ns == "" {
		ns = "default"
	}
	job := cfg.JobID
	if job == "" {
		job = cfg.JobName
	}
	idx, err := allocIndex(cfg.Env)
	if err != nil {
		return store.Key{}, err
	}
	k := store.Key{Namespace: ns, Job: job, Group: cfg.TaskGroupName, Task: cfg.Name, Index: idx}
	if err := k.Validate(); err != nil {
		return store.Key{}, fmt.Errorf("checkpoint key: %w", err)
	}
	return k, nil
}

func allocIndex(env map[string]string) (int, error) {
	if v, ok := env["NOMAD_ALLOC_INDEX"]; ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("checkpoint key: NOMAD_ALLOC_INDEX=%q is not an index", v)
		}
		return n, nil
	}
	name := env["NOMAD_ALLOC_NAME"]
	open := strings.LastIndexByte(name, '[')
	if open < 0 || !strings.HasSuffix(name, "]") {
		return 0, fmt.Errorf("checkpoint key: cannot find the allocation index (NOMAD_ALLOC_INDEX unset, NOMAD_ALLOC_NAME=%q)", name)
	}
	n, err := strconv.Atoi(name[open+1 : len(name)-1])
	if err != nil || n < 0 {
		return 0, fmt.Errorf("checkpoint key: NOMAD_ALLOC_NAME=%q has no valid index", name)
	}
	return n, nil
}
