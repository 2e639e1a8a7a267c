package driver

import (
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
)

func TestReschedulePolicyWarning(t *testing.T) {
	ptr := func(s string) *string { return &s }
	yes, no, one, day := true, false, 1, 24*time.Hour
	cases := []struct {
		name string
		job  *api.Job
		warn bool
	}{
		{"batch default", &api.Job{Type: ptr("batch"), TaskGroups: []*api.TaskGroup{{Name: ptr("train")}}}, true},
		{"service default", &api.Job{Type: ptr("service"), TaskGroups: []*api.TaskGroup{{Name: ptr("train")}}}, false},
		{"batch unlimited", &api.Job{Type: ptr("batch"), TaskGroups: []*api.TaskGroup{{Name: ptr("train"),
			ReschedulePolicy: &api.ReschedulePolicy{Unlimited: &yes}}}}, false},
		{"service limited", &api.Job{Type: ptr("service"), TaskGroups: []*api.TaskGroup{{Name: ptr("train"),
			ReschedulePolicy: &api.ReschedulePolicy{Unlimited: &no, Attempts: &one, Interval: &day}}}}, true},
		{"other group unlimited", &api.Job{Type: ptr("batch"), TaskGroups: []*api.TaskGroup{{Name: ptr("other"),
			ReschedulePolicy: &api.ReschedulePolicy{Unlimited: &yes}}}}, true},
		{"job level unlimited", &api.Job{Type: ptr("batch"), Reschedule: &api.ReschedulePolicy{Unlimited: &yes},
			TaskGroups: []*api.TaskGroup{{Name: ptr("train")}}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := reschedulePolicyWarning(tc.job, "train")
			if !tc.warn {
				must.Eq(t, "", msg)
				return
			}
			must.StrContains(t, msg, `group "train" allows 1 reschedule(s) in 24h0m0s`)
			must.StrContains(t, msg, "unlimited = true")
		})
	}
}
