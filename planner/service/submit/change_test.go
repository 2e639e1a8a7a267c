package submit

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
)

func TestChange_Writes(t *testing.T) {
	job := fakenomad.TrainingJob("a", 1, nil)
	c := Change{
		Namespace: "default", JobID: "a", Job: job, JobModifyIndex: 7,
		Counts: map[string]int{"worker": 4}, Group: "worker", Nodes: []string{"n1", "n2"},
		Message: "m", Meta: map[string]any{EventMetaAction: ActionScale},
	}

	s := c.Scale("worker", 9)
	must.Eq(t, Scale{Namespace: "default", JobID: "a", Group: "worker", Count: 4, JobModifyIndex: 9,
		Message: "m", Meta: c.Meta}, s)
	ev := c.Event("worker", true)
	must.True(t, ev.EventOnly)
	must.True(t, ev.Error)
	must.Eq(t, 0, ev.JobModifyIndex)

	must.True(t, c.MovesPlacement())
	cp, err := c.Version()
	must.NoError(t, err)
	must.Eq(t, 4, *cp.TaskGroups[0].Count)
	must.Eq(t, []string{"n1", "n2"}, PlacementNodes(cp, "worker"))
	must.Eq(t, 1, *job.TaskGroups[0].Count) // the version read is untouched

	c.Job = cp
	must.False(t, c.MovesPlacement()) // already placed there
	c.Nodes = nil
	must.False(t, c.MovesPlacement())

	c.Counts = map[string]int{"ps": 1}
	_, err = c.Version()
	must.ErrorContains(t, err, "0 of 1 groups found")
}
