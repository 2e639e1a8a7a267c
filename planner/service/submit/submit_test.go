package submit

import (
	"context"
	"testing"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
)

func TestWriter(t *testing.T) {
	n := fakenomad.New()
	defer n.Close()
	w := &Writer{Client: n.Client(), Logger: hclog.NewNullLogger()}
	idx := n.PutJob(fakenomad.TrainingJob("a", 1, nil))
	ctx := context.Background()

	res, err := w.Scale(ctx, Scale{Namespace: "default", JobID: "a", Group: "worker", Count: 3, JobModifyIndex: idx, Message: "m"})
	must.NoError(t, err)
	must.Greater(t, idx, res.JobModifyIndex)

	// The same write again is refused: the index moved (no duplicates).
	_, err = w.Scale(ctx, Scale{Namespace: "default", JobID: "a", Group: "worker", Count: 3, JobModifyIndex: idx})
	must.ErrorIs(t, err, ErrConflict)
	_, err = w.Scale(ctx, Scale{Namespace: "default", JobID: "a", Group: "nope", Count: 3, JobModifyIndex: res.JobModifyIndex})
	must.ErrorIs(t, err, ErrRejected)
	_, err = w.Scale(ctx, Scale{Namespace: "default", JobID: "a", Group: "worker", Count: 3})
	must.ErrorContains(t, err, "without a job modify index")

	job := n.Job("default", "a")
	cp, err := SetCounts(job, map[string]int{"worker": 5})
	must.NoError(t, err)
	must.Eq(t, 3, *job.TaskGroups[0].Count) // the original is untouched
	_, err = w.Register(ctx, cp, idx, "stale")
	must.ErrorIs(t, err, ErrConflict)
	_, err = w.Register(ctx, cp, *job.JobModifyIndex, "ok")
	must.NoError(t, err)
	must.Eq(t, 5, *n.Job("default", "a").TaskGroups[0].Count)
	_, err = SetCounts(job, map[string]int{"missing": 1})
	must.Error(t, err)

	job = n.Job("default", "a")
	_, err = w.Stop(ctx, job, *job.JobModifyIndex, "converged")
	must.NoError(t, err)
	must.True(t, *n.Job("default", "a").Stop)
}

func TestSetDeviceCount(t *testing.T) {
	job := fakenomad.TrainingJob("a", 1, nil)
	job.TaskGroups[0].Tasks[0].Resources = &nomadapi.Resources{Devices: []*nomadapi.RequestedDevice{{Name: "caravan/gpushare", Count: ptr(uint64(2))}}}
	cp, err := SetDeviceCount(job, "worker", "caravan/gpushare", 4)
	must.NoError(t, err)
	must.Eq(t, uint64(4), *cp.TaskGroups[0].Tasks[0].Resources.Devices[0].Count)
	must.Eq(t, uint64(2), *job.TaskGroups[0].Tasks[0].Resources.Devices[0].Count)
	_, err = SetDeviceCount(job, "worker", "nvidia/gpu", 1)
	must.ErrorContains(t, err, "no task requests it")
}

func ptr[T any](v T) *T { return &v }

func TestSetPlacement(t *testing.T) {
	job := fakenomad.TrainingJob("a", 1, nil)
	user := nomadapi.NewAffinity("${meta.rack}", "=", "r1", 20)
	job.TaskGroups[0].Affinities = []*nomadapi.Affinity{user}
	must.SliceEmpty(t, PlacementNodes(job, "worker"))
	cp, err := SetPlacement(job, "worker", []string{"n2", "n1"})
	must.NoError(t, err)
	must.Eq(t, []string{"n1", "n2"}, PlacementNodes(cp, "worker"))
	must.SliceLen(t, 2, cp.TaskGroups[0].Affinities)
	must.SliceLen(t, 1, job.TaskGroups[0].Affinities) // the original is untouched
	cp, err = SetPlacement(cp, "worker", []string{"n3"})
	must.NoError(t, err)
	must.Eq(t, []string{"n3"}, PlacementNodes(cp, "worker"))
	must.Eq(t, user.LTarget, cp.TaskGroups[0].Affinities[0].LTarget) // the user's affinity stays
	cp, err = SetPlacement(cp, "worker", nil)
	must.NoError(t, err)
	must.SliceLen(t, 1, cp.TaskGroups[0].Affinities)
	_, err = SetPlacement(job, "nope", nil)
	must.Error(t, err)
}
