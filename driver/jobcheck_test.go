package driver

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
)

// roleJob is a job whose group "train" has a docker main task "counter"
// and the given caravan tasks.
func roleJob(tasks ...*api.Task) *api.Job {
	id, group, unlimited := "j", "train", true
	main := &api.Task{Name: "counter", Driver: "docker"}
	return &api.Job{ID: &id, Name: &id, TaskGroups: []*api.TaskGroup{{
		Name: &group, Tasks: append([]*api.Task{main}, tasks...),
		ReschedulePolicy: &api.ReschedulePolicy{Unlimited: &unlimited},
	}}}
}

func roleTaskOf(name, hook string, sidecar bool, ckpt map[string]any) *api.Task {
	t := &api.Task{Name: name, Driver: PluginName, Config: map[string]any{"checkpoint": []map[string]any{ckpt}}}
	if hook != "" {
		t.Lifecycle = &api.TaskLifecycle{Hook: hook, Sidecar: sidecar}
	}
	return t
}

// TestValidateJobTask: the errors a role task meets at start (checkpoint.task
// and its lifecycle, checked against the job), its config's errors beside a
// typo, and the store key, every one in one call.
func TestValidateJobTask(t *testing.T) {
	ck := func(kv ...string) map[string]any {
		m := map[string]any{"dir": "checkpoint"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name string
		task *api.Task
		want []string
	}{
		{"restore ok", roleTaskOf("restore", "prestart", false, ck("role", "restore", "task", "counter")), nil},
		{"no such task", roleTaskOf("restore", "prestart", false, ck("role", "restore", "task", "countr")),
			[]string{`checkpoint.task: no task "countr" in group "train"`}},
		{"wrong hook and no such task", roleTaskOf("restore", "poststart", false, ck("role", "restore", "task", "countr")),
			[]string{`checkpoint.task: no task "countr"`, `checkpoint.role: "restore" needs lifecycle { hook = "prestart", sidecar = false }`}},
		{"a typo beside a bad scope", roleTaskOf("sidecar", "poststart", true, ck("role", "sidecar", "task", "counter", "intervall", "1m", "scope", "job")),
			[]string{`checkpoint.intervall: `, `checkpoint.scope: "job" must be`}},
		{"key too long for the store", roleTaskOf("commit", "poststop", false, ck("role", "commit", "task", strings.Repeat("x", 300))),
			[]string{`checkpoint.task: no task`, "checkpoint key: "}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := roleJob(tc.task)
			errs := ValidateJobTask(job, "train", tc.task)
			msg := fmt.Sprint(errs)
			must.Len(t, len(tc.want), errs, must.Sprint(msg))
			for _, w := range tc.want {
				must.StrContains(t, msg, w)
			}
		})
	}
}

// TestJobWarnings: role tasks of one main task on different keys, and a
// reschedule policy that ends training, are warnings naming the group.
func TestJobWarnings(t *testing.T) {
	restore := roleTaskOf("restore", "prestart", false, map[string]any{"role": "restore", "task": "counter", "dir": "c"})
	commitGroup := roleTaskOf("commit", "poststop", false, map[string]any{"role": "commit", "task": "counter", "dir": "c", "scope": "group"})
	commitReplica := roleTaskOf("commit", "poststop", false, map[string]any{"role": "commit", "task": "counter", "dir": "c", "scope": "replica"})

	must.SliceEmpty(t, JobWarnings(roleJob(restore, commitReplica)))

	w := JobWarnings(roleJob(restore, commitGroup))
	must.SliceLen(t, 1, w)
	must.StrContains(t, w[0], `group "train": the checkpoint.role tasks of task "counter" would read and write different checkpoints`)

	job := roleJob(restore, commitReplica)
	batch := api.JobTypeBatch
	job.Type, job.TaskGroups[0].ReschedulePolicy = &batch, nil // a batch job's default: once in 24h
	w = JobWarnings(job)
	must.SliceLen(t, 1, w)
	must.StrHasPrefix(t, `group "train" allows `, w[0])
}
