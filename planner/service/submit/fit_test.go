package submit

import (
	"context"
	"testing"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
)

// TestWriter_PlanCountsDryRun: the dry run plans the read job with the new
// counts, changes nothing, and turns Nomad's failed allocations into a
// reason; a 403 names the submit-job capability Nomad checks for a plan.
func TestWriter_PlanCountsDryRun(t *testing.T) {
	fake := fakenomad.New()
	defer fake.Close()
	fake.PutJob(fakenomad.TrainingJob("a", 0, nil))
	w := &Writer{Client: fake.Client(), Logger: hclog.NewNullLogger()}
	ctx := context.Background()

	fit, err := w.PlanCounts(ctx, fake.Job("default", "a"), map[string]int{"worker": 3})
	must.NoError(t, err)
	must.True(t, fit.Fits())
	must.Eq(t, []string{"plan default/a worker=3"}, fake.PlansSnapshot())
	must.Eq(t, 0, *fake.Job("default", "a").TaskGroups[0].Count)
	must.SliceEmpty(t, fake.WritesSnapshot())

	fake.SetPlanFailures("default", "a", map[string]*nomadapi.AllocationMetric{"worker": {
		NodesEvaluated: 2, NodesExhausted: 1, CoalescedFailures: 0,
		DimensionExhausted: map[string]int{"devices: gpu": 1}, ConstraintFiltered: map[string]int{"${attr.kernel.name} = linux": 1},
	}})
	fit, err = w.PlanCounts(ctx, fake.Job("default", "a"), map[string]int{"worker": 3})
	must.NoError(t, err)
	must.False(t, fit.Fits())
	must.Eq(t, "group worker: 1 allocation(s) unplaced (devices: gpu exhausted on 1 node(s), constraint ${attr.kernel.name} = linux filtered 1 node(s)); 1 of 2 nodes exhausted", fit.Reason())

	_, err = w.PlanCounts(ctx, fake.Job("default", "a"), map[string]int{"nope": 1})
	must.ErrorContains(t, err, "1 groups found")

	fake.SetPlanStatus(403)
	_, err = w.PlanCounts(ctx, fake.Job("default", "a"), map[string]int{"worker": 3})
	must.ErrorIs(t, err, ErrForbidden)
	must.ErrorContains(t, err, "needs the submit-job capability (policy jobspecs/acl/planner-nomad-register.policy.hcl)")
}
