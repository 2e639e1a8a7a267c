package driver

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/caravan-nomad/caravan/driver/store"
)

// checkpointKey is the store key of a task:
// namespace/job[@incarnation]/group/task/slot.
//
//   - job is the job ID bound to the job's incarnation (see
//     checkpointIdentity), or checkpoint.key unbound (incarnation "");
//   - slot is the allocation index (scope "alloc": a replacement allocation,
//     same index on any node, finds its predecessor's checkpoints) or
//     "group" (scope "group": one state for the whole task group).
//
// The index comes from NOMAD_ALLOC_INDEX, or is parsed from
// NOMAD_ALLOC_NAME ("job.group[3]"). The store escapes every part, so no
// job ID or key name can leave its directory.
func checkpointKey(cfg *drivers.TaskConfig, cc *CheckpointConfig, incarnation string) (store.Key, error) {
	job := cfg.JobID
	if job == "" {
		job = cfg.JobName
	}
	if cc.Key != "" {
		job, incarnation = cc.Key, ""
	}
	k := store.Key{
		Namespace:   taskNamespace(cfg),
		Job:         job,
		Group:       cfg.TaskGroupName,
		Task:        cfg.Name,
		Shared:      cc.Scope == ScopeGroup,
		Incarnation: incarnation,
	}
	if !k.Shared {
		idx, err := allocIndex(cfg.Env)
		if err != nil {
			return store.Key{}, err
		}
		k.Index = idx
	}
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
