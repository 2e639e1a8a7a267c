package submit

import (
	"context"
	"testing"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
)

// On an agent that enforces a scale's index, the probe writes nothing and
// counts change with scales.
func TestWriter_ScaleIndexEnforced(t *testing.T) {
	n := fakenomad.New()
	defer n.Close()
	w := &Writer{Client: n.Client(), Logger: hclog.NewNullLogger()}
	idx := n.PutJob(fakenomad.TrainingJob("a", 1, nil))
	ctx := context.Background()
	res, err := w.Scale(ctx, Scale{Namespace: "default", JobID: "a", Group: "worker", Count: 3, JobModifyIndex: idx})
	must.NoError(t, err)
	_, err = w.Scale(ctx, Scale{Namespace: "default", JobID: "a", Group: "worker", Count: 2, JobModifyIndex: res.JobModifyIndex})
	must.NoError(t, err)
	must.Eq(t, []string{"scale default/a worker 3", "scale default/a worker 2"}, n.WritesSnapshot())
	must.Eq(t, 1, n.RequestCount("GET /v1/job/a"), must.Sprint("probed once"))
}

// On an agent that ignores a scale's index (Nomad before 1.8.2), counts
// change with registrations that enforce it: a stale decision is refused,
// and each change leaves a count-less event with the planner's meta and the
// count, which EventCount reads.
func TestWriter_ScaleIndexIgnored(t *testing.T) {
	n := fakenomad.New()
	defer n.Close()
	n.SetScaleIgnoresIndex(true)
	w := &Writer{Client: n.Client(), Logger: hclog.NewNullLogger()}
	idx := n.PutJob(fakenomad.TrainingJob("a", 1, nil))
	ctx := context.Background()
	meta := map[string]any{EventMetaAction: ActionScale}
	scale := func(count int, index uint64) (Result, error) {
		return w.Scale(ctx, Scale{Namespace: "default", JobID: "a", Group: "worker", Count: count, JobModifyIndex: index,
			Message: "caravan planner: grow", Meta: meta})
	}

	// The probe (count unchanged) moved the index: this decision is made
	// again on the new version.
	_, err := scale(3, idx)
	must.ErrorIs(t, err, ErrConflict)
	must.Eq(t, []string{"scale default/a worker 1"}, n.WritesSnapshot())
	must.Eq(t, 1, *n.Job("default", "a").TaskGroups[0].Count)

	idx = *n.Job("default", "a").JobModifyIndex
	res, err := scale(3, idx)
	must.NoError(t, err)
	must.Eq(t, 3, *n.Job("default", "a").TaskGroups[0].Count)
	must.Eq(t, *n.Job("default", "a").JobModifyIndex, res.JobModifyIndex)

	// A concurrent edit: the stale decision is refused, not applied.
	_, err = scale(5, idx)
	must.ErrorIs(t, err, ErrConflict)
	must.Eq(t, 3, *n.Job("default", "a").TaskGroups[0].Count)

	_, err = scale(2, res.JobModifyIndex) // chained index, as manager/apply.go does
	must.NoError(t, err)
	must.Eq(t, []string{"scale default/a worker 1", "register default/a", "register default/a"}, n.WritesSnapshot())

	var counts []int64
	probes := 0
	for _, ev := range n.Events("default", "a", "worker") {
		if c, ok := EventCount(&ev); ok {
			counts = append(counts, c)
			must.Eq(t, ActionScale, ev.Meta[EventMetaAction])
		}
		if _, ok := ev.Meta[EventMetaProbe]; ok {
			probes++
		}
	}
	must.Eq(t, []int64{3, 2}, counts)
	must.Eq(t, 1, probes)
}

func TestEventCount(t *testing.T) {
	c := int64(4)
	for _, tc := range []struct {
		name string
		ev   *nomadapi.ScalingEvent
		want int64
		ok   bool
	}{
		{"nil", nil, 0, false},
		{"count", &nomadapi.ScalingEvent{Count: &c}, 4, true},
		{"meta count (JSON)", &nomadapi.ScalingEvent{Meta: map[string]any{EventMetaCount: float64(2)}}, 2, true},
		{"count-less", &nomadapi.ScalingEvent{Meta: map[string]any{EventMetaAction: ActionScale}}, 0, false},
		{"probe", &nomadapi.ScalingEvent{Count: &c, Meta: map[string]any{EventMetaProbe: true}}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := EventCount(tc.ev)
			must.Eq(t, tc.ok, ok)
			must.Eq(t, tc.want, got)
		})
	}
}
