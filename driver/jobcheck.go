package driver

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/plugins/drivers"
)

// keyCheckIncarnation stands for the job's create index, unknown before
// submission, when the store key a task would get is checked.
const keyCheckIncarnation = "1"

// ValidateJobTask checks task, of group in job, as the driver would when
// Nomad starts it: its config (ValidateTaskConfig), a checkpoint.role
// against its group's tasks and lifecycle hooks (checkRole, which a role
// task runs at start) and the store key its checkpoints would get
// (checkpointKey). It returns every error at once, for `caravan validate`.
func ValidateJobTask(job *api.Job, group string, task *api.Task) []error {
	tc, errs := decodeTaskConfig(task.Config)
	if tc == nil || tc.Checkpoint == nil {
		return errs
	}
	cc := tc.Checkpoint
	if cc.Role != "" {
		errs = append(errs, unjoin(checkRole(job, group, task.Name, cc))...)
	}
	if _, err := jobTaskKey(job, group, task.Name, cc); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// jobTaskKey is the store key (index 0) of a task of job with checkpoint
// block cc: a role task's is its checkpoint.task's.
func jobTaskKey(job *api.Job, group, task string, cc *CheckpointConfig) (string, error) {
	if cc.Role != "" {
		if cc.Task == "" {
			return "", nil // the config's own validation refuses it
		}
		task = cc.Task
	}
	cfg := &drivers.TaskConfig{
		Namespace: deref(job.Namespace), JobID: deref(job.ID), JobName: deref(job.Name),
		TaskGroupName: group, Name: task, Env: map[string]string{"NOMAD_ALLOC_INDEX": "0"},
	}
	k, err := checkpointKey(cfg, cc, keyCheckIncarnation)
	if err != nil {
		return "", err
	}
	return k.String(), nil
}

// JobWarnings are what would go wrong, without a refusal, with job's
// caravan checkpointing tasks: a group's reschedule policy that ends
// training after a few moves (the warning the driver puts in a task event
// at start, reschedulePolicyWarning), and role tasks of one main task whose
// scope or key differ, so that restore and commit would use different
// checkpoint series. Each names its group.
func JobWarnings(job *api.Job) []string {
	var out []string
	for _, tg := range job.TaskGroups {
		group := deref(tg.Name)
		roles := map[string][]roleUse{} // main task -> its role tasks
		checkpoints := false
		for _, t := range tg.Tasks {
			if t.Driver != PluginName {
				continue
			}
			tc, errs := decodeTaskConfig(t.Config)
			if tc == nil || tc.Checkpoint == nil || len(errs) > 0 {
				continue
			}
			checkpoints = true
			cc := tc.Checkpoint
			if cc.Role == "" || cc.Task == "" {
				continue
			}
			if key, err := jobTaskKey(job, group, t.Name, cc); err == nil {
				roles[cc.Task] = append(roles[cc.Task], roleUse{t.Name, cc.Scope, cc.Key, key})
			}
		}
		if checkpoints {
			if w := reschedulePolicyWarning(job, group); w != "" {
				out = append(out, strings.TrimPrefix(w, "Checkpoint warning: "))
			}
		}
		out = append(out, roleKeyWarnings(group, roles)...)
	}
	return out
}

// roleUse is a role task of a main task and the store key it uses.
type roleUse struct{ task, scope, key, storeKey string }

// roleKeyWarnings warns, per main task, when its role tasks' store keys
// differ (checkpoint.scope or checkpoint.key).
func roleKeyWarnings(group string, roles map[string][]roleUse) []string {
	mains := make([]string, 0, len(roles))
	for m := range roles {
		mains = append(mains, m)
	}
	sort.Strings(mains)
	var out []string
	for _, m := range mains {
		keys := map[string]bool{}
		var uses []string
		for _, r := range roles[m] {
			keys[r.storeKey] = true
			uses = append(uses, fmt.Sprintf("%q: scope %q, key %q", r.task, r.scope, r.key))
		}
		if len(keys) > 1 {
			out = append(out, fmt.Sprintf("group %q: the checkpoint.role tasks of task %q would read and write different checkpoints (%s); "+
				"give them the same checkpoint.scope (\"alloc\" and \"replica\" share a key) and checkpoint.key",
				group, m, strings.Join(uses, "; ")))
		}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
