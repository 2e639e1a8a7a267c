package source

import (
	"errors"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
)

// TestValidate: every error of a job's caravan_* meta at once, each naming
// its key; a job without caravan_* meta has nothing to check.
func TestValidate(t *testing.T) {
	job := func(meta map[string]string, groups ...string) *nomadapi.Job {
		j := &nomadapi.Job{Meta: meta}
		for _, g := range groups {
			j.TaskGroups = append(j.TaskGroups, &nomadapi.TaskGroup{Name: &g, Tasks: []*nomadapi.Task{{Name: "t"}}})
		}
		return j
	}
	cases := []struct {
		name string
		job  *nomadapi.Job
		want []string
	}{
		{"no caravan meta", job(map[string]string{"owner": "me"}, "a", "b"), nil},
		{"good", job(map[string]string{MetaEnabled: "true", MetaWorkerGroup: "worker", MetaMinWorkers: "1", MetaMaxWorkers: "4"},
			"worker"), nil},
		{"planner off, keys still checked", job(map[string]string{MetaEnabled: "false", MetaPriority: "0"}, "worker"),
			[]string{"caravan_priority: want an integer >= 1"}},
		{"every error", job(map[string]string{MetaEnabled: "true", MetaWorkerGroup: "workr", MetaMaxWorkers: "x",
			MetaSpeedModel: "ring", "caravan_min_worker": "1"}, "worker"),
			[]string{"caravan_max_workers: want an integer", "caravan_speed_model: want allreduce", "caravan_worker_group: group \"workr\"",
				`unknown meta key "caravan_min_worker": the planner does not read it, so it sets nothing (a typo?); did you mean "caravan_min_workers"?`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := Validate(tc.job)
			msg := errors.Join(errs...)
			must.Len(t, len(tc.want), errs, must.Sprint(msg))
			for _, w := range tc.want {
				must.StrContains(t, msg.Error(), w)
			}
		})
	}
	j := job(map[string]string{}, "worker")
	j.TaskGroups[0].Meta = map[string]string{MetaMinWorkers: "1"}
	j.TaskGroups[0].Tasks[0].Meta = map[string]string{MetaGang: "true"}
	errs := Validate(j)
	must.Len(t, 2, errs)
	must.StrContains(t, errs[0].Error(), `group "worker" meta caravan_min_workers: the planner reads caravan_* keys from the job's meta only`)
	must.StrContains(t, errs[1].Error(), `group "worker" task "t" meta caravan_gang`)
}
