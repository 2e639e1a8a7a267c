package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/caravan-nomad/caravan/internal/allocs"
	"github.com/caravan-nomad/caravan/planner/service/clock"
	"github.com/caravan-nomad/caravan/planner/service/config"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
	"github.com/caravan-nomad/caravan/planner/service/source"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

type leaderFlag bool

func (l *leaderFlag) IsLeader() bool { return bool(*l) }

type harness struct {
	t      *testing.T
	nomad  *fakenomad.Server
	src    *source.Source
	store  *ingest.Store
	clk    *clock.Fake
	mgr    *Manager
	leader *leaderFlag
	writer Writer
}

func defaultSettings() Settings {
	return Settings{
		Policy: config.Policy{
			Name: "optimus", Interval: time.Minute, Cooldown: 2 * time.Minute, RestartCost: 30 * time.Second,
			MaxChangesPerRound: 4, MinGain: 1, SuspendQuantum: 10 * time.Minute,
		},
		Capacity: config.Capacity{Device: "gpu", SharesPerGPU: 4, GPUsPerNode: 1},
	}
}

func newHarness(t *testing.T, s Settings, nodes int) *harness {
	t.Helper()
	h := &harness{t: t, nomad: fakenomad.New(), clk: clock.NewFake(time.Now()), store: ingest.NewStore(1000)}
	t.Cleanup(h.nomad.Close)
	var stubs []*nomadapi.NodeListStub
	for i := 0; i < nodes; i++ {
		stubs = append(stubs, &nomadapi.NodeListStub{ID: fmt.Sprintf("node-%d", i), Name: fmt.Sprintf("client%d", i+1),
			Status: "ready", SchedulingEligibility: "eligible"})
	}
	h.nomad.SetNodes(stubs)
	h.src = source.New(source.Config{Client: h.nomad.Client(), Clock: clock.Real{}, Wait: 200 * time.Millisecond, Device: "gpu",
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.src.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	l := leaderFlag(true)
	h.leader = &l
	h.writer = &submit.Writer{Client: h.nomad.Client(), Logger: hclog.NewNullLogger()}
	var err error
	h.mgr, err = New(Config{Settings: s, Source: h.src, Progress: h.store, Writer: writerFunc{h}, Leader: h.leader, Clock: h.clk})
	must.NoError(t, err)
	return h
}

// writerFunc lets a test swap the writer after construction.
type writerFunc struct{ h *harness }

func (w writerFunc) Scale(ctx context.Context, s submit.Scale) (submit.Result, error) {
	return w.h.writer.Scale(ctx, s)
}
func (w writerFunc) Register(ctx context.Context, j *nomadapi.Job, idx uint64, reason string) (submit.Result, error) {
	return w.h.writer.Register(ctx, j, idx, reason)
}
func (w writerFunc) PlanCounts(ctx context.Context, j *nomadapi.Job, counts map[string]int) (submit.Fit, error) {
	if fc, ok := w.h.writer.(FitChecker); ok {
		return fc.PlanCounts(ctx, j, counts)
	}
	return submit.Fit{}, nil
}
func (w writerFunc) Stop(ctx context.Context, j *nomadapi.Job, idx uint64, reason string) (submit.Result, error) {
	return w.h.writer.Stop(ctx, j, idx, reason)
}

// sync waits until the source reflects the fake's current state: every job
// that opts in, at its current indexes, and no other; each job's current
// allocations as the fake lists them. (It once checked only jobs a, b and
// c, so a round could run before the source saw a job d put last.)
func (h *harness) sync() {
	h.t.Helper()
	var behind string
	must.Wait(h.t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		behind = h.sourceBehind()
		return behind == ""
	}), wait.Timeout(5*time.Second), wait.Gap(5*time.Millisecond)),
		must.Func(func() string { return "source did not catch up with the fake nomad: " + behind }))
}

// sourceBehind says how the source's snapshot differs from the fake's
// state ("" when it does not).
func (h *harness) sourceBehind() string {
	snap := h.src.Snapshot()
	if !snap.Synced {
		return "not synced"
	}
	all := &nomadapi.QueryOptions{Namespace: "*"}
	stubs, _, err := h.nomad.Client().Jobs().ListOptions(&nomadapi.JobListOptions{Fields: &nomadapi.JobListFields{Meta: true}}, all)
	if err != nil {
		return err.Error()
	}
	list, _, err := h.nomad.Client().Allocations().List(all)
	if err != nil {
		return err.Error()
	}
	byJob := map[source.JobKey][]*nomadapi.AllocationListStub{}
	for _, a := range list {
		k := source.JobKey{Namespace: a.Namespace, ID: a.JobID}
		byJob[k] = append(byJob[k], a)
	}
	want := 0
	for _, st := range stubs {
		if !source.Enabled(st.Meta) {
			continue
		}
		want++
		k := source.JobKey{Namespace: st.Namespace, ID: st.ID}
		sj, ok := snap.Jobs[k]
		switch {
		case !ok:
			return k.String() + " not seen"
		case *sj.Job.JobModifyIndex != st.JobModifyIndex || *sj.Job.ModifyIndex != st.ModifyIndex:
			return k.String() + " seen at an older index"
		case allocKeys(sj.Allocs) != allocKeys(allocs.Current(sj.Job, byJob[k])):
			return k.String() + "'s allocations not seen"
		}
	}
	if len(snap.Jobs) != want {
		return fmt.Sprintf("%d jobs seen, the fake has %d", len(snap.Jobs), want)
	}
	return ""
}

// allocKeys is a set of allocations as one comparable string.
func allocKeys(as []*nomadapi.AllocationListStub) string {
	keys := make([]string, 0, len(as))
	for _, a := range as {
		keys = append(keys, fmt.Sprintf("%s@%d/%s/%s", a.ID, a.ModifyIndex, a.ClientStatus, a.DesiredStatus))
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// measuredAt records that the job's speed was measured with w workers, so
// the exploration rule (policy.ExploreMax) lets it grow to 2w; the speed
// model stays unknown without progress reports.
func (h *harness) measuredAt(id string, w int) {
	h.t.Helper()
	h.mgr.mu.Lock()
	defer h.mgr.mu.Unlock()
	h.mgr.memFor(source.JobKey{Namespace: "default", ID: id}).speed[shape{workers: w, nodes: 1}] = 1
}

func (h *harness) round() *Round {
	h.t.Helper()
	h.sync()
	r, err := h.mgr.RunRound(context.Background())
	must.NoError(h.t, err)
	return r
}

func count(t *testing.T, n *fakenomad.Server, id string) int {
	t.Helper()
	return *n.Job("default", id).TaskGroups[0].Count
}

func TestManager_ScalesUpByMarginalGain(t *testing.T) {
	h := newHarness(t, defaultSettings(), 2)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "4"}))
	h.measuredAt("a", 2)
	r := h.round()
	must.SliceLen(t, 1, r.Actions)
	a := r.Actions[0]
	must.Eq(t, StatusApplied, a.Status)
	must.Eq(t, KindScale, a.Kind)
	must.Eq(t, 4, a.To) // 2 GPUs x 4 shares / 2 shares per worker
	must.Eq(t, 4, count(t, h.nomad, "a"))
	evs := h.nomad.Events("default", "a", "worker")
	must.SliceLen(t, 1, evs)
	must.StrContains(t, evs[0].Message, "marginal gain")
	must.Eq(t, any(submit.ActionScale), evs[0].Meta[submit.EventMetaAction])

	// The next round sees the new count and writes nothing more.
	r = h.round()
	must.SliceEmpty(t, r.Actions)
	must.SliceLen(t, 1, h.nomad.WritesSnapshot())
}

func TestManager_DryRunAndFollowerNeverWrite(t *testing.T) {
	cases := []struct {
		name   string
		dry    bool
		leader bool
		want   string
	}{
		{"dry-run leader", true, true, "dry-run"},
		{"follower", false, false, "not the leader"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := defaultSettings()
			s.DryRun = tc.dry
			h := newHarness(t, s, 2)
			*h.leader = leaderFlag(tc.leader)
			h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "4"}))
			h.measuredAt("a", 2)
			r := h.round()
			must.SliceLen(t, 1, r.Actions)
			must.Eq(t, StatusPlanned, r.Actions[0].Status)
			must.StrContains(t, r.Actions[0].Error, tc.want)
			must.SliceEmpty(t, h.nomad.WritesSnapshot())
			must.Eq(t, 1, count(t, h.nomad, "a"))
		})
	}
}

// userEditWriter edits the job as a user would just before the planner's
// write lands.
type userEditWriter struct {
	h     *harness
	inner Writer
}

func (w userEditWriter) Scale(ctx context.Context, s submit.Scale) (submit.Result, error) {
	j := w.h.nomad.Job(s.Namespace, s.JobID)
	j.Meta["owner_note"] = "edited by a user"
	w.h.nomad.PutJob(j)
	return w.inner.Scale(ctx, s)
}
func (w userEditWriter) Register(ctx context.Context, j *nomadapi.Job, idx uint64, reason string) (submit.Result, error) {
	return w.inner.Register(ctx, j, idx, reason)
}
func (w userEditWriter) Stop(ctx context.Context, j *nomadapi.Job, idx uint64, reason string) (submit.Result, error) {
	return w.inner.Stop(ctx, j, idx, reason)
}

func TestManager_NeverOverwritesConcurrentUserEdit(t *testing.T) {
	h := newHarness(t, defaultSettings(), 2)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "4"}))
	h.measuredAt("a", 2)
	inner := h.writer
	h.writer = userEditWriter{h: h, inner: inner}
	r := h.round()
	must.SliceLen(t, 1, r.Actions)
	must.Eq(t, StatusConflict, r.Actions[0].Status)
	must.Eq(t, 1, count(t, h.nomad, "a"))
	must.Eq(t, "edited by a user", h.nomad.Job("default", "a").Meta["owner_note"])
	must.Eq(t, uint64(1), h.mgr.MetricsSnapshot().Conflicts)

	// Next round decides on the user's version and keeps the edit.
	h.writer = inner
	r = h.round()
	must.Eq(t, StatusApplied, r.Actions[0].Status)
	j := h.nomad.Job("default", "a")
	must.Eq(t, 4, *j.TaskGroups[0].Count)
	must.Eq(t, "edited by a user", j.Meta["owner_note"])
}

func TestManager_TimeSlicesUnderOverload(t *testing.T) {
	s := defaultSettings()
	s.Cooldown = time.Minute
	s.SuspendQuantum = 5 * time.Minute
	h := newHarness(t, s, 1) // one GPU: 4 shares, room for one 2x2-share job
	gang := map[string]string{"caravan_min_workers": "2", "caravan_max_workers": "2", "caravan_gang": "true"}
	h.nomad.PutJob(fakenomad.TrainingJob("a", 2, gang))
	h.nomad.PutJob(fakenomad.TrainingJob("b", 0, gang))

	// Within a's quantum, b waits.
	r := h.round()
	must.SliceEmpty(t, r.Actions)
	must.Eq(t, StateQueued, findJob(t, r, "b").State)

	// After the quantum, a is suspended and b starts.
	h.clk.Advance(6 * time.Minute)
	r = h.round()
	must.SliceLen(t, 2, r.Actions)
	must.Eq(t, KindSuspend, r.Actions[0].Kind) // capacity is freed first
	must.Eq(t, "default/a", r.Actions[0].Job)
	must.Eq(t, KindStart, r.Actions[1].Kind)
	must.Eq(t, 0, count(t, h.nomad, "a"))
	must.Eq(t, 2, count(t, h.nomad, "b"))
	evs := h.nomad.Events("default", "a", "worker")
	must.Eq(t, any(submit.ActionSuspend), evs[len(evs)-1].Meta[submit.EventMetaAction])

	r = h.round()
	must.Eq(t, StateSuspended, findJob(t, r, "a").State)
	must.SliceEmpty(t, r.Actions)

	// After b's quantum, a resumes.
	h.clk.Advance(6 * time.Minute)
	r = h.round()
	kinds := []Kind{}
	for _, a := range r.Actions {
		kinds = append(kinds, a.Kind)
	}
	must.Eq(t, []Kind{KindSuspend, KindResume}, kinds)
	must.Eq(t, 2, count(t, h.nomad, "a"))
	must.Eq(t, 0, count(t, h.nomad, "b"))
}

func TestManager_SuspendedStateSurvivesLeaderChange(t *testing.T) {
	h := newHarness(t, defaultSettings(), 1)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 0, nil))
	// An earlier leader suspended a (recorded in its scaling event) and a
	// user paused b by hand.
	h.nomad.AddEvent("default", "a", "worker", nomadapi.ScalingEvent{Count: ptr(int64(0)), Message: "suspend",
		Meta: map[string]any{submit.EventMetaAction: submit.ActionSuspend}, Time: uint64(time.Now().Add(-time.Hour).UnixNano())})
	j := fakenomad.TrainingJob("b", 2, nil)
	h.nomad.PutJob(j)
	j = h.nomad.Job("default", "b")
	zero := 0
	j.TaskGroups[0].Count = &zero
	h.nomad.PutJob(j)
	r := h.round()
	must.Eq(t, StateSuspended, findJob(t, r, "a").State)
	must.Eq(t, StatePaused, findJob(t, r, "b").State)
	must.SliceLen(t, 1, r.Actions)
	must.Eq(t, KindResume, r.Actions[0].Kind)
	must.Eq(t, 0, count(t, h.nomad, "b")) // a user's pause is respected
}

// On an agent that ignores a scale's index, a suspension is a registration
// and a count-less event carrying the count (submit/scaleindex.go); a later
// probe of the agent's index checks is no event of anyone's. A new leader
// still reads the job as suspended, not as paused by someone else.
func TestManager_SuspendedByRegistrationSurvivesLeaderChange(t *testing.T) {
	h := newHarness(t, defaultSettings(), 1)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 0, nil))
	at := time.Now().Add(-time.Hour)
	h.nomad.AddEvent("default", "a", "worker", nomadapi.ScalingEvent{Message: "suspend", Time: uint64(at.UnixNano()),
		Meta: map[string]any{submit.EventMetaAction: submit.ActionSuspend, submit.EventMetaCount: float64(0)}})
	h.nomad.AddEvent("default", "a", "worker", nomadapi.ScalingEvent{Count: ptr(int64(0)), Message: "probe",
		Time: uint64(at.Add(time.Minute).UnixNano()), Meta: map[string]any{submit.EventMetaProbe: true}})
	r := h.round()
	must.Eq(t, StateSuspended, findJob(t, r, "a").State)
}

func TestManager_StopsRerunsOfUserErrors(t *testing.T) {
	h := newHarness(t, defaultSettings(), 1)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "1"}))
	var allocs []*nomadapi.AllocationListStub
	for i := 0; i < 3; i++ {
		allocs = append(allocs, &nomadapi.AllocationListStub{
			ID: fmt.Sprintf("alloc-%d", i), Namespace: "default", JobID: "a", TaskGroup: "worker",
			ClientStatus: "failed", DesiredStatus: "run",
			TaskStates: map[string]*nomadapi.TaskState{"train": {Events: []*nomadapi.TaskEvent{
				{Type: nomadapi.TaskStarted, Time: int64(i)}, {Type: nomadapi.TaskTerminated, ExitCode: 1, Time: int64(i) + 1},
			}}},
		})
	}
	h.nomad.SetAllocs(allocs)
	deadlineAllocs(t, h, 3)
	r := h.round()
	must.SliceLen(t, 1, r.Actions)
	must.Eq(t, KindUserError, r.Actions[0].Kind)
	must.Eq(t, 0, count(t, h.nomad, "a"))
	evs := h.nomad.Events("default", "a", "worker")
	must.SliceLen(t, 2, evs)
	must.Eq(t, any(submit.ActionUserError), evs[0].Meta[submit.EventMetaAction]) // the count change
	must.Nil(t, evs[1].Count)                                                    // and the red event
	must.True(t, evs[1].Error)
	must.StrContains(t, evs[1].Message, "user errors")

	r = h.round()
	must.Eq(t, StateHeld, findJob(t, r, "a").State)
	must.SliceEmpty(t, r.Actions)
}

func TestManager_StopsConvergedJob(t *testing.T) {
	h := newHarness(t, defaultSettings(), 1)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{
		"caravan_max_workers": "1", "caravan_stop_on_converge": "true", "caravan_target_loss": "0.5"}))
	k := ingest.JobKey{Namespace: "default", ID: "a"}
	for i := 1; i <= 20; i++ {
		h.store.Add(k, ingest.Record{Sample: ingest.Sample{Step: int64(i * 100), Loss: 1/(0.002*float64(i*100)+1) + 0.3},
			Time: h.clk.Now(), AllocationID: "x"})
	}
	r := h.round()
	must.SliceLen(t, 1, r.Actions)
	must.Eq(t, KindStop, r.Actions[0].Kind)
	must.Eq(t, StatusApplied, r.Actions[0].Status)
	j := h.nomad.Job("default", "a")
	must.True(t, *j.Stop)
	r = h.round()
	must.Eq(t, StateStopped, findJob(t, r, "a").State)
	must.SliceEmpty(t, r.Actions)
}

// rateLimitedPair returns a harness allowing one change a round, with
// two measured jobs, a and b, at 1 worker of at most 2: each wants a
// change.
func rateLimitedPair(t *testing.T) *harness {
	t.Helper()
	s := defaultSettings()
	s.MaxChangesPerRound = 1
	h := newHarness(t, s, 2)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "2"}))
	h.nomad.PutJob(fakenomad.TrainingJob("b", 1, map[string]string{"caravan_max_workers": "2"}))
	h.measuredAt("a", 1)
	h.measuredAt("b", 1)
	return h
}

func TestManager_RateLimitDefersChanges(t *testing.T) {
	h := rateLimitedPair(t)
	r := h.round()
	must.SliceLen(t, 2, r.Actions)
	must.Eq(t, StatusApplied, r.Actions[0].Status)
	must.Eq(t, StatusDeferred, r.Actions[1].Status)
	must.SliceLen(t, 1, h.nomad.WritesSnapshot())
	r = h.round()
	must.SliceLen(t, 1, r.Actions)
	must.Eq(t, StatusApplied, r.Actions[0].Status)
	must.SliceLen(t, 2, h.nomad.WritesSnapshot())
}

// failingWriter loses every write, as when Nomad is unreachable.
type failingWriter struct{}

var errRefused = fmt.Errorf("dial tcp 127.0.0.1:4646: connection refused")

func (failingWriter) Scale(context.Context, submit.Scale) (submit.Result, error) {
	return submit.Result{}, errRefused
}
func (failingWriter) Register(context.Context, *nomadapi.Job, uint64, string) (submit.Result, error) {
	return submit.Result{}, errRefused
}
func (failingWriter) Stop(context.Context, *nomadapi.Job, uint64, string) (submit.Result, error) {
	return submit.Result{}, errRefused
}

func TestManager_KeepsWorkingWhileNomadIsDown(t *testing.T) {
	h := newHarness(t, defaultSettings(), 2)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "4"}))
	h.measuredAt("a", 2)
	inner := h.writer
	h.writer = failingWriter{}
	r := h.round()
	must.SliceLen(t, 1, r.Actions)
	must.Eq(t, StatusFailed, r.Actions[0].Status)
	must.Eq(t, uint64(1), h.mgr.MetricsSnapshot().WriteErrors)

	// Nomad down entirely: the round reports the error, writes nothing,
	// and the service carries on.
	h.nomad.SetDown(true)
	h.writer = inner
	r, _ = h.mgr.RunRound(context.Background())
	for _, a := range r.Actions {
		must.NotEq(t, StatusApplied, a.Status)
	}
	h.nomad.SetDown(false)
	r = h.round()
	must.Eq(t, StatusApplied, r.Actions[0].Status)
	r = h.round()
	must.SliceEmpty(t, r.Actions)
	must.SliceLen(t, 1, h.nomad.WritesSnapshot()) // exactly one write: no duplicates
}

func deadlineAllocs(t *testing.T, h *harness, n int) {
	t.Helper()
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		j, ok := h.src.Snapshot().Jobs[source.JobKey{Namespace: "default", ID: "a"}]
		return ok && len(j.Allocs) == n
	}), wait.Timeout(2500*time.Millisecond), wait.Gap(5*time.Millisecond)), must.Sprintf("job a's %d allocations not seen", n))
}

func findJob(t *testing.T, r *Round, id string) JobView {
	t.Helper()
	for _, j := range r.Jobs {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("job %s not in round (jobs: %v)", id, r.Jobs)
	return JobView{}
}

func ptr[T any](v T) *T { return &v }

func TestManager_WorkersAndParameterServersChangeInOneRegistration(t *testing.T) {
	h := newHarness(t, defaultSettings(), 2)
	job := fakenomad.TrainingJob("a", 1, map[string]string{
		"caravan_max_workers": "4", "caravan_ps_group": "ps", "caravan_min_ps": "1", "caravan_max_ps": "2"})
	ps := nomadapi.NewTaskGroup("ps", 2)
	ps.AddTask(nomadapi.NewTask("serve", "raw_exec"))
	job.AddTaskGroup(ps)
	h.nomad.PutJob(job)
	h.measuredAt("a", 2)
	r := h.round()
	must.SliceLen(t, 1, r.Actions)
	a := r.Actions[0]
	must.Eq(t, StatusApplied, a.Status)
	must.Eq(t, "ps", a.PSGroup)
	must.NotEq(t, a.PSFrom, a.PSTo)
	must.NotEq(t, a.From, a.To)
	must.Eq(t, []string{"register default/a"}, h.nomad.WritesSnapshot())
	j := h.nomad.Job("default", "a")
	must.Eq(t, a.To, *j.TaskGroups[0].Count)
	must.Eq(t, a.PSTo, *j.TaskGroups[1].Count)
	must.StrContains(t, a.Message, "parameter servers")
}

// rejectingWriter is Nomad refusing updates (e.g. during a deployment).
type rejectingWriter struct{ calls *int }

func (w rejectingWriter) Scale(context.Context, submit.Scale) (submit.Result, error) {
	*w.calls++
	return submit.Result{}, fmt.Errorf("scaling: %w: job scaling blocked due to active deployment", submit.ErrRejected)
}
func (w rejectingWriter) Register(context.Context, *nomadapi.Job, uint64, string) (submit.Result, error) {
	return submit.Result{}, submit.ErrRejected
}
func (w rejectingWriter) Stop(context.Context, *nomadapi.Job, uint64, string) (submit.Result, error) {
	return submit.Result{}, submit.ErrRejected
}

// refusedGrowth returns a harness whose writer Nomad refuses every
// update, with job a measured at 1 worker of at most 4 (it wants to grow),
// and the count of the writer's calls.
func refusedGrowth(t *testing.T) (*harness, *int) {
	t.Helper()
	h := newHarness(t, defaultSettings(), 2)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "4"}))
	h.measuredAt("a", 2)
	calls := 0
	h.writer = rejectingWriter{calls: &calls}
	return h, &calls
}

func TestManager_RefusedUpdateWaitsACooldown(t *testing.T) {
	h, calls := refusedGrowth(t)
	r := h.round()
	must.Eq(t, StatusRefused, r.Actions[0].Status)
	r = h.round()
	must.Eq(t, StatusDeferred, r.Actions[0].Status)
	must.Eq(t, 1, *calls)
	h.clk.Advance(defaultSettings().Cooldown + time.Second)
	r = h.round()
	must.Eq(t, StatusRefused, r.Actions[0].Status)
	must.Eq(t, 2, *calls)
}

func TestManager_PlacementAffinityRegistersAfterTheScale(t *testing.T) {
	s := defaultSettings()
	s.PlacementAffinity = true
	h := newHarness(t, s, 2)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "2"}))
	h.measuredAt("a", 1)
	r := h.round()
	must.SliceLen(t, 1, r.Actions)
	a := r.Actions[0]
	must.Eq(t, StatusApplied, a.Status)
	must.Eq(t, 2, a.To)
	must.SliceLen(t, 1, a.Nodes) // two half-GPU workers fit on one node
	must.Eq(t, []string{"scale default/a worker 2", "register default/a"}, h.nomad.WritesSnapshot())
	j := h.nomad.Job("default", "a")
	must.Eq(t, 2, *j.TaskGroups[0].Count)
	must.Eq(t, a.Nodes, submit.PlacementNodes(j, "worker"))
	must.StrContains(t, h.nomad.Events("default", "a", "worker")[0].Message, "marginal gain")
}

func TestManager_SpeedAtReportedShapeAndFullSampleShown(t *testing.T) {
	// Dry run: a scale in flight would (rightly) keep the speed out.
	s := defaultSettings()
	s.DryRun = true
	h := newHarness(t, s, 1)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "4", "caravan_max_ps": "2"}))
	h.nomad.SetAllocs([]*nomadapi.AllocationListStub{{ID: "alloc-0", Namespace: "default", JobID: "a", TaskGroup: "worker",
		NodeID: "node-0", ClientStatus: "running", DesiredStatus: "run"}})
	deadlineAllocs(t, h, 1)
	k := ingest.JobKey{Namespace: "default", ID: "a"}
	t0 := h.clk.Now()
	report := func(step int64) {
		h.store.Add(k, ingest.Record{Sample: ingest.Sample{Step: step, Loss: 1, SamplesPerSec: 64, Workers: 3, PS: 2,
			StepsTotal: 1000, GradSqr: 0.5, GradVar: 2}, Time: h.clk.Now(), AllocationID: "alloc-0"})
	}
	report(100)
	h.round() // the reported shape is stable from t0 on
	h.clk.Advance(10 * time.Second)
	report(300)
	must.Eq(t, t0.Add(10*time.Second), h.clk.Now())
	fit := findJob(t, h.round(), "a").Fit
	// The task measured its speed with 3 workers and 2 parameter servers,
	// though Nomad shows one allocation: the sample counts for 3 and 2.
	must.SliceLen(t, 1, fit.SpeedSamples)
	must.Eq(t, 3, fit.SpeedSamples[0].Workers)
	must.Eq(t, 2, fit.SpeedSamples[0].PS)
	must.Eq(t, 20.0, fit.SpeedSamples[0].StepsPerSec)
	must.NotNil(t, fit.LastSample)
	must.Eq(t, int64(1000), fit.LastSample.StepsTotal)

	// A report claiming more workers than the job may have is not believed:
	// its speed counts for the shape Nomad shows.
	h.store.Add(k, ingest.Record{Sample: ingest.Sample{Step: 500, Loss: 1, SamplesPerSec: 64, Workers: 5000},
		Time: h.clk.Now(), AllocationID: "alloc-0"})
	h.clk.Advance(10 * time.Second)
	h.store.Add(k, ingest.Record{Sample: ingest.Sample{Step: 700, Loss: 1, SamplesPerSec: 64, Workers: 5000},
		Time: h.clk.Now(), AllocationID: "alloc-0"})
	h.round()
	h.clk.Advance(10 * time.Second)
	h.store.Add(k, ingest.Record{Sample: ingest.Sample{Step: 900, Loss: 1, SamplesPerSec: 64, Workers: 5000},
		Time: h.clk.Now(), AllocationID: "alloc-0"})
	for _, s := range findJob(t, h.round(), "a").Fit.SpeedSamples {
		must.LessEq(t, 4, s.Workers)
	}
	must.Eq(t, 0.5, fit.LastSample.GradSqr)
	must.Eq(t, 2.0, fit.LastSample.GradVar)
}

// A poisoned series (as stored before samples had bounds: step 2^63-1, loss
// 1e308) must not make the round unrenderable: its model is dropped with an
// error, and every other job is unaffected.
func TestManager_PoisonedProgressKeepsRoundRenderable(t *testing.T) {
	h := newHarness(t, defaultSettings(), 2)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "2"}))
	h.nomad.PutJob(fakenomad.TrainingJob("b", 1, map[string]string{"caravan_max_workers": "2"}))
	now := h.clk.Now()
	for i := 1; i <= 5; i++ {
		h.store.Add(ingest.JobKey{Namespace: "default", ID: "b"}, ingest.Record{
			Sample: ingest.Sample{Step: int64(i * 100), Loss: 1/(0.002*float64(i*100)+1) + 0.3, SamplesPerSec: 10},
			Time:   now.Add(time.Duration(i) * time.Second), AllocationID: "x"})
	}
	h.nomad.SetAllocs([]*nomadapi.AllocationListStub{{ID: "y", Namespace: "default", JobID: "a", TaskGroup: "worker",
		NodeID: "node-0", ClientStatus: "running", DesiredStatus: "run"}})
	deadlineAllocs(t, h, 1)
	h.round()
	var poison []ingest.Sample
	for i := 1; i <= 20; i++ {
		poison = append(poison, ingest.Sample{Step: int64(i * 100), Loss: 2 / float64(i), SamplesPerSec: 10})
	}
	poison = append(poison, ingest.Sample{Step: math.MaxInt64, Loss: 1e308, SamplesPerSec: 1e308}, ingest.Sample{Step: 2100, Loss: 0.1})
	for i, s := range poison {
		h.store.Add(ingest.JobKey{Namespace: "default", ID: "a"}, ingest.Record{Sample: s, Time: h.clk.Now().Add(time.Duration(i) * time.Second), AllocationID: "y"})
	}
	h.clk.Advance(30 * time.Second)
	r := h.round()
	_, err := json.Marshal(r)
	must.NoError(t, err)
	a, b := findJob(t, r, "a"), findJob(t, r, "b")
	must.Nil(t, a.Fit.Convergence)
	must.StrContains(t, a.Fit.ConvergenceErr, "not finite")
	must.NotNil(t, b.Fit.Convergence)
	for _, v := range r.Jobs {
		_, err := json.Marshal(v)
		must.NoError(t, err, must.Sprintf("job %s", v.ID))
	}
}

// leaseLeader leads until a time on the test's clock, like consul.Elector
// with a session last confirmed at until minus the TTL.
type leaseLeader struct {
	mu    sync.Mutex
	clk   clock.Clock
	until time.Time
}

func (l *leaseLeader) LeaseUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.clk.Now().Before(l.until) {
		return time.Time{}
	}
	return l.until
}
func (l *leaseLeader) IsLeader() bool { return !l.LeaseUntil().IsZero() }
func (l *leaseLeader) expire() {
	l.mu.Lock()
	l.until = time.Time{}
	l.mu.Unlock()
}

// lapsingWriter lets the leader's lease lapse after the first write, as when
// Consul stops answering in the middle of a round.
type lapsingWriter struct {
	Writer
	lease     *leaseLeader
	deadlines []time.Duration
}

func (w *lapsingWriter) Scale(ctx context.Context, s submit.Scale) (submit.Result, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		return submit.Result{}, fmt.Errorf("write without a deadline")
	}
	w.deadlines = append(w.deadlines, time.Until(dl))
	res, err := w.Writer.Scale(ctx, s)
	w.lease.expire()
	return res, err
}

// The leader decides a round with two changes; its session lapses after the
// first write: the second is not written, and every write is bounded by the
// lease.
func TestManager_FencesEveryWriteOnTheLease(t *testing.T) {
	h := newHarness(t, defaultSettings(), 2)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "2"}))
	h.nomad.PutJob(fakenomad.TrainingJob("b", 1, map[string]string{"caravan_max_workers": "2"}))
	lease := &leaseLeader{clk: h.clk, until: h.clk.Now().Add(10 * time.Second)}
	w := &lapsingWriter{Writer: h.writer, lease: lease}
	var err error
	h.mgr, err = New(Config{Settings: defaultSettings(), Source: h.src, Progress: h.store, Writer: w, Leader: lease, Clock: h.clk})
	must.NoError(t, err)
	h.measuredAt("a", 1)
	h.measuredAt("b", 1)
	r := h.round()
	must.True(t, r.Leader)
	must.SliceLen(t, 2, r.Actions)
	must.Eq(t, StatusApplied, r.Actions[0].Status)
	must.Eq(t, StatusPlanned, r.Actions[1].Status)
	must.StrContains(t, r.Actions[1].Error, "leadership not confirmed")
	must.SliceLen(t, 1, h.nomad.WritesSnapshot())
	must.SliceLen(t, 1, w.deadlines)
	must.LessEq(t, 10*time.Second, w.deadlines[0])
}

// forbiddingWriter is a token whose ACL policy grants scale-job only.
type forbiddingWriter struct{ inner Writer }

func (w forbiddingWriter) Scale(ctx context.Context, s submit.Scale) (submit.Result, error) {
	return w.inner.Scale(ctx, s)
}
func (w forbiddingWriter) Register(context.Context, *nomadapi.Job, uint64, string) (submit.Result, error) {
	return submit.Result{}, fmt.Errorf("registering: %w: it needs the submit-job capability", submit.ErrForbidden)
}
func (w forbiddingWriter) Stop(ctx context.Context, j *nomadapi.Job, idx uint64, reason string) (submit.Result, error) {
	return w.Register(ctx, j, idx, reason)
}

// TestManager_ForbiddenRegistrationIsReportedOnce: with a scale-only token
// a decision that needs a registration (workers and parameter servers in
// one version) is refused, says why in the plan, and is logged at error
// level once, not every round.
func TestManager_ForbiddenRegistrationIsReportedOnce(t *testing.T) {
	h := newHarness(t, defaultSettings(), 2)
	var logs strings.Builder
	h.mgr.log = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	job := fakenomad.TrainingJob("a", 1, map[string]string{
		"caravan_max_workers": "4", "caravan_ps_group": "ps", "caravan_min_ps": "1", "caravan_max_ps": "2"})
	ps := nomadapi.NewTaskGroup("ps", 2)
	ps.AddTask(nomadapi.NewTask("serve", "raw_exec"))
	job.AddTaskGroup(ps)
	h.nomad.PutJob(job)
	h.measuredAt("a", 2)
	h.writer = forbiddingWriter{inner: h.writer}
	for range 2 {
		r := h.round()
		must.SliceLen(t, 1, r.Actions)
		must.Eq(t, StatusRefused, r.Actions[0].Status)
		must.StrContains(t, r.Actions[0].Error, "submit-job")
		h.clk.Advance(defaultSettings().Cooldown + time.Second)
	}
	must.Eq(t, 1, strings.Count(logs.String(), "[ERROR]"), must.Sprint(logs.String()))
	must.StrContains(t, logs.String(), "lacks an ACL capability")
	must.SliceEmpty(t, h.nomad.WritesSnapshot())
}

// TestManager_ForbiddenAffinityKeepsTheScale: with placement_affinity and a
// scale-only token the count change is applied and reported as such; only
// the affinity registration is refused, and said so.
func TestManager_ForbiddenAffinityKeepsTheScale(t *testing.T) {
	s := defaultSettings()
	s.PlacementAffinity = true
	h := newHarness(t, s, 2)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "2"}))
	h.measuredAt("a", 1)
	h.writer = forbiddingWriter{inner: h.writer}
	r := h.round()
	must.SliceLen(t, 1, r.Actions)
	a := r.Actions[0]
	must.Eq(t, StatusApplied, a.Status)
	must.StrContains(t, a.Error, "placement affinity not registered")
	must.StrContains(t, a.Error, "submit-job")
	must.Eq(t, []string{"scale default/a worker 2"}, h.nomad.WritesSnapshot())
}

// On an agent that ignores a scale's index (Nomad before 1.8.2), the
// planner's first write probes it with a no-change scale, which writes a
// new job version. A job submitted with 0 workers is still queued after
// that, not "paused by its author", and starts once it fits (the e2e
// TestPlanner_GangWaitsWhole on Nomad 1.6.3 stayed at 0 for good).
func TestManager_ProbedQueuedJobStillStarts(t *testing.T) {
	h := newHarness(t, defaultSettings(), 1)
	h.nomad.SetScaleIgnoresIndex(true)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 0, nil))
	r := h.round()
	// The probe moved the job's index under the decision: decided again.
	if count(t, h.nomad, "a") == 0 {
		must.Eq(t, StateQueued, findJob(t, r, "a").State, must.Sprintf("%+v", r.Jobs))
		r = h.round()
	}
	must.Eq(t, StateQueued, findJob(t, r, "a").State)
	must.Positive(t, count(t, h.nomad, "a"), must.Sprintf("the queued job never started: %+v", r.Actions))
	must.Positive(t, *h.nomad.Job("default", "a").Version)
}

// Nomad before 1.8 records a scale's event after the job's new version,
// in a raft entry of its own: a round between the two sees the version
// without its event. The events are read again for a while after the
// index moves, so the late event still counts.
func TestManager_LateScalingEventIsRead(t *testing.T) {
	h := newHarness(t, defaultSettings(), 1)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 0, nil))
	h.nomad.PutJob(h.nomad.Job("default", "a")) // version 1, its event not yet recorded
	r := h.round()
	must.Eq(t, StatePaused, findJob(t, r, "a").State)
	h.nomad.AddEvent("default", "a", "worker", nomadapi.ScalingEvent{Count: ptr(int64(0)), Message: "probe",
		Meta: map[string]any{submit.EventMetaProbe: true}, Time: uint64(h.clk.Now().UnixNano())})
	h.clk.Advance(5 * time.Second)
	r = h.round()
	must.Eq(t, StateQueued, findJob(t, r, "a").State, must.Sprint("the late event was never read"))
}
