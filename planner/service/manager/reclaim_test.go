package manager

import (
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/queue"
	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
	"github.com/caravan-nomad/caravan/planner/service/source"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

// reclaimForTeamA runs a round, with two team queues on 2 GPUs, in which
// team b's gang of 4 runs (holding every GPU, 1 borrowed) and team a's
// gang of 2 arrives submitted at aCount workers; it returns the round and
// b's action in it (the last, zero if none).
func reclaimForTeamA(t *testing.T, aCount int) (*harness, *Round, Action) {
	t.Helper()
	s := defaultSettings()
	s.Queues = twoTeamQueues()
	h := newHarness(t, s, 2)
	h.nomad.PutJob(fakenomad.TrainingJob("b", 4, gangMeta("4", nil)))
	h.nomad.SetAllocs(running(map[string]int{"b": 4}))
	h.nomad.PutJob(fakenomad.TrainingJob("a", aCount, gangMeta("2", map[string]string{queue.MetaKey: "team-a"})))
	r := h.round()
	var got Action
	for _, a := range r.Actions {
		if a.Job == "default/b" {
			got = a
		}
	}
	return h, r, got
}

// TestManager_QueuesReclaimEventNamesTheQueue: the suspend of a borrower
// for another queue is a scaling event whose message and meta
// (caravan_reclaimed_by) name the queue that asked, not time-slicing.
func TestManager_QueuesReclaimEventNamesTheQueue(t *testing.T) {
	h, r, got := reclaimForTeamA(t, 0)
	must.Eq(t, KindSuspend, got.Kind, must.Sprintf("%+v", r.Actions))
	must.Eq(t, "team-a", got.ReclaimedBy)
	evs := h.nomad.Events("default", "b", "worker")
	must.SliceNotEmpty(t, evs)
	ev := evs[len(evs)-1]
	must.Eq(t, "team-a", ev.Meta[submit.MetaReclaimedBy])
	must.Eq(t, submit.ActionSuspend, ev.Meta[submit.EventMetaAction])
	must.StrContains(t, ev.Message, "reclaimed by queue team-a")
	must.StrNotContains(t, ev.Message, "time-slicing")
	must.SliceLen(t, 1, r.Reclaims)
	must.Eq(t, Reclaim{Time: r.Time, Job: "default/b", Kind: KindSuspend, From: 4, To: 0, Queue: "team-a", Via: "scale"}, r.Reclaims[0])
	must.Eq(t, r.Reclaims, h.mgr.Last().Reclaims)
}

// TestManager_QueuesShrinkReclaimNamesTheQueue: an elastic borrower
// shrunk to its queue cap because another queue takes GPUs back names
// that queue in its scaling event.
func TestManager_QueuesShrinkReclaimNamesTheQueue(t *testing.T) {
	s := defaultSettings()
	s.Queues = twoTeamQueues()
	h := newHarness(t, s, 2)
	h.nomad.PutJob(fakenomad.TrainingJob("b", 4, map[string]string{"caravan_min_workers": "1", "caravan_max_workers": "4"}))
	h.nomad.SetAllocs(running(map[string]int{"b": 4}))
	h.nomad.PutJob(fakenomad.TrainingJob("a", 0, gangMeta("2", map[string]string{queue.MetaKey: "team-a"})))
	r := h.round()
	must.Eq(t, 2, count(t, h.nomad, "b"), must.Sprintf("actions %+v", r.Actions))
	evs := h.nomad.Events("default", "b", "worker")
	must.SliceNotEmpty(t, evs)
	ev := evs[len(evs)-1]
	must.Eq(t, "team-a", ev.Meta[submit.MetaReclaimedBy], must.Sprintf("%+v", ev))
	must.StrContains(t, ev.Message, "(reclaimed by queue team-a)")
}

// TestManager_ReclaimByRegistrationRecorded: a reclaim applied through a
// registration (workers and parameter servers changed together) leaves a
// count-less scaling event naming the queue, and the job's meta is not
// touched (a meta change would restart every allocation).
func TestManager_ReclaimByRegistrationRecorded(t *testing.T) {
	h := newHarness(t, defaultSettings(), 2)
	job := fakenomad.TrainingJob("b", 4, map[string]string{
		"caravan_max_workers": "4", "caravan_ps_group": "ps", "caravan_min_ps": "1", "caravan_max_ps": "2"})
	ps := nomadapi.NewTaskGroup("ps", 2)
	ps.AddTask(nomadapi.NewTask("serve", "raw_exec"))
	job.AddTaskGroup(ps)
	idx := h.nomad.PutJob(job)
	h.sync()
	sj := h.src.Snapshot().Jobs[source.JobKey{Namespace: "default", ID: "b"}]
	must.NotNil(t, sj)
	a := Action{Job: "default/b", key: sj.Key, job: sj, Kind: KindScale, Group: "worker", From: 4, To: 2,
		PSGroup: "ps", PSFrom: 2, PSTo: 1, ReclaimedBy: "team-a", jobModifyIndex: idx}
	a.Message = scaleMessage(a)
	must.NoError(t, h.mgr.write(t.Context(), &Round{Policy: "optimus"}, &a, sj))
	must.Eq(t, []string{"register default/b"}, h.nomad.WritesSnapshot())
	got := h.nomad.Job("default", "b")
	must.Eq(t, 2, *got.TaskGroups[0].Count)
	must.MapNotContainsKey(t, got.Meta, submit.MetaReclaimedBy)
	evs := h.nomad.Events("default", "b", "worker")
	must.SliceLen(t, 1, evs)
	must.Nil(t, evs[0].Count)
	must.Eq(t, "team-a", evs[0].Meta[submit.MetaReclaimedBy])
	must.StrContains(t, evs[0].Message, "reclaimed by queue team-a")
	h.mgr.noteReclaimLocked(&Round{}, &a)
	must.Eq(t, "registration", h.mgr.reclaims[0].Via)
}

func driverEvent(at time.Time, details map[string]string) *nomadapi.TaskEvent {
	return &nomadapi.TaskEvent{Type: nomadapi.TaskDriverMessage, Time: at.UnixNano(), Details: details}
}

func withTaskEvents(id string, evs ...*nomadapi.TaskEvent) *nomadapi.AllocationListStub {
	return &nomadapi.AllocationListStub{ID: id, TaskGroup: "ps",
		TaskStates: map[string]*nomadapi.TaskState{"ps": {Events: evs}}}
}

func TestDurableSince(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	saved := map[string]string{"generation": "3", "duration": "12ms", "reason": "periodic", "bytes": "10"}
	restored := map[string]string{"generation": "3", "duration": "5ms", "age": "1m"}
	failed := map[string]string{"reason": "periodic"}
	stale := map[string]string{"reason": "stop", "stale": "true"}
	fellBack := map[string]string{"generation": "2"}
	cases := []struct {
		name    string
		resumed time.Time
		allocs  []*nomadapi.AllocationListStub
		want    time.Time
	}{
		{"nothing known", time.Time{}, nil, time.Time{}},
		{"resume only", t0, nil, t0},
		{"a save after the resume", t0, []*nomadapi.AllocationListStub{
			withTaskEvents("x", driverEvent(t0.Add(time.Minute), saved))}, t0.Add(time.Minute)},
		{"newest of saved and restored, any allocation", time.Time{}, []*nomadapi.AllocationListStub{
			withTaskEvents("old", driverEvent(t0, saved)),
			withTaskEvents("new", driverEvent(t0.Add(2*time.Minute), restored))}, t0.Add(2 * time.Minute)},
		{"a save before a fresh resume counts from the resume", t0.Add(time.Hour), []*nomadapi.AllocationListStub{
			withTaskEvents("x", driverEvent(t0, saved))}, t0.Add(time.Hour)},
		{"failed, stale and fall-back events are no durable state", t0, []*nomadapi.AllocationListStub{
			withTaskEvents("x", driverEvent(t0.Add(time.Minute), failed), driverEvent(t0.Add(2*time.Minute), stale),
				driverEvent(t0.Add(3*time.Minute), fellBack),
				&nomadapi.TaskEvent{Type: nomadapi.TaskStarted, Time: t0.Add(4 * time.Minute).UnixNano(), Details: saved})}, t0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := &source.Job{Allocs: tc.allocs}
			must.Eq(t, tc.want, durableSince(j, tc.resumed))
		})
	}
}

// TestManager_QueuesReclaimLeastProgressLostByCheckpoint: two borrowers of
// team b at equal priority; "fresh" resumed long ago but its driver saved
// a checkpoint a minute ago, "young" resumed five minutes ago and never
// checkpointed. Suspending fresh loses a minute, young five: fresh is
// reclaimed (time since resume alone picked young).
func TestManager_QueuesReclaimLeastProgressLostByCheckpoint(t *testing.T) {
	s := defaultSettings()
	s.Queues = twoTeamQueues()
	s.Queues.Queues[1].Guarantee = 0
	s.Queues.Queues[0].Guarantee = 2000
	h := newHarness(t, s, 2) // 2 GPUs: 4 half-GPU workers, all team a's guarantee
	now := h.clk.Now()
	for _, id := range []string{"fresh", "young"} {
		h.nomad.PutJob(fakenomad.TrainingJob(id, 2, gangMeta("2", nil)))
	}
	allocs := running(map[string]int{"fresh": 2, "young": 2})
	for _, a := range allocs {
		if a.JobID == "fresh" {
			a.TaskStates = map[string]*nomadapi.TaskState{"train": {Events: []*nomadapi.TaskEvent{
				driverEvent(now.Add(-time.Minute), map[string]string{"generation": "7", "duration": "20ms"})}}}
		}
	}
	h.nomad.SetAllocs(allocs)
	h.sync()
	h.mgr.memFor(source.JobKey{Namespace: "default", ID: "fresh"}).lastResume = now.Add(-time.Hour)
	h.mgr.memFor(source.JobKey{Namespace: "default", ID: "young"}).lastResume = now.Add(-5 * time.Minute)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 0, gangMeta("2", map[string]string{queue.MetaKey: "team-a"})))
	r := h.round()
	kinds := map[string]Kind{}
	for _, a := range r.Actions {
		kinds[a.Job] = a.Kind
	}
	must.Eq(t, KindSuspend, kinds["default/fresh"], must.Sprintf("%+v", r.Actions))
	must.MapNotContainsKey(t, kinds, "default/young", must.Sprintf("%+v", r.Actions))
	for _, v := range r.Jobs {
		if v.ID == "fresh" {
			must.Eq(t, 60.0, v.SinceCheckpoint)
		}
	}
}

// TestManager_QueuesReclaimForASubmittedNewcomer: team a's job is
// submitted with its 2 workers (not at 0) while team b's gang holds every
// GPU, 1 of them borrowed. Nothing of a's is placed, so it holds nothing:
// the queues reclaim b's GPUs for it, naming team a (they counted a as
// running and suspended b as "no longer fits", naming nobody).
func TestManager_QueuesReclaimForASubmittedNewcomer(t *testing.T) {
	h, r, got := reclaimForTeamA(t, 2)
	must.Eq(t, KindSuspend, got.Kind, must.Sprintf("%+v", r.Actions))
	must.Eq(t, "team-a", got.ReclaimedBy, must.Sprintf("%+v", got))
	must.Eq(t, 1, r.Queues[0].Reclaims)
	must.Eq(t, 2, count(t, h.nomad, "a"))
}
