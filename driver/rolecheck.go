package driver

import (
	"fmt"

	"github.com/hashicorp/nomad/api"
)

// checkRole refuses a role its task cannot honour: restore must be a
// prestart task that is not a sidecar, sidecar a poststart sidecar, commit
// a poststop task, and checkpoint.task must be a main task of the same group
// whose driver mounts the allocation's shared directory. Every problem is
// reported (joined), each naming checkpoint.role or checkpoint.task.
func checkRole(job *api.Job, group, name string, cc *CheckpointConfig) error {
	var tg *api.TaskGroup
	for _, g := range job.TaskGroups {
		if g.Name != nil && *g.Name == group {
			tg = g
		}
	}
	if tg == nil {
		return fmt.Errorf("checkpoint.role: group %q not found in job", group)
	}
	var self, target *api.Task
	for _, t := range tg.Tasks {
		switch t.Name {
		case name:
			self = t
		case cc.Task:
			target = t
		}
	}
	var errs []error
	switch {
	case cc.Task == "": // the config's own validation refuses it
	case cc.Task == name:
		errs = append(errs, fmt.Errorf("checkpoint.task: %q is this task; name the main task whose checkpoints it handles", cc.Task))
	case target == nil:
		errs = append(errs, fmt.Errorf("checkpoint.task: no task %q in group %q", cc.Task, group))
	case target.Lifecycle != nil && target.Lifecycle.Hook != "":
		errs = append(errs, fmt.Errorf("checkpoint.task: %q is a %s lifecycle task, not a main task", cc.Task, target.Lifecycle.Hook))
	default:
		if err := checkSharesAllocDir(target); err != nil {
			errs = append(errs, err)
		}
		if err := checkpointMountOver(target, cc.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := checkRoleLifecycle(self, cc.Role); err != nil {
		errs = append(errs, err)
	}
	return joinErrors(errs)
}

// checkRoleLifecycle refuses a role in a lifecycle it cannot run in.
func checkRoleLifecycle(self *api.Task, role string) error {
	want, ok := roleLifecycles[role]
	if !ok {
		return nil // the config's own validation refuses an unknown role
	}
	hook, sidecar := "", false
	if self != nil && self.Lifecycle != nil {
		hook, sidecar = self.Lifecycle.Hook, self.Lifecycle.Sidecar
	}
	if hook == want.hook && sidecar == want.sidecar {
		return nil
	}
	got := "a main task"
	if hook != "" {
		got = fmt.Sprintf("lifecycle hook %q (sidecar %t)", hook, sidecar)
	}
	return fmt.Errorf("checkpoint.role: %q needs lifecycle { hook = %q, sidecar = %t }; this task has %s",
		role, want.hook, want.sidecar, got)
}

// checkSharesAllocDir refuses a main task whose driver does not mount the
// allocation's shared directory.
func checkSharesAllocDir(t *api.Task) error {
	if ok, known := allocDirDrivers[t.Driver]; known && !ok {
		return fmt.Errorf("checkpoint.task: task %q runs under driver %q, which does not mount the allocation directory "+
			"(alloc/) into the task, so its checkpoints cannot be exchanged through checkpoint.dir", t.Name, t.Driver)
	}
	return nil
}

// findTask is task name of group in job, or nil.
func findTask(job *api.Job, group, name string) *api.Task {
	for _, g := range job.TaskGroups {
		if g.Name == nil || *g.Name != group {
			continue
		}
		for _, t := range g.Tasks {
			if t.Name == name {
				return t
			}
		}
	}
	return nil
}
