package queue

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// job is a waiting gang job of n GPUs in namespace ns submitted at minute at.
func job(id, ns string, n, at int) Job {
	return Job{ID: id, Namespace: ns, Min: n * g, Max: n * g, Submitted: t0.Add(time.Duration(at) * time.Minute)}
}

func running(j Job) Job { j.Held = j.Min; return j }

func withPrio(j Job, p int) Job { j.Priority = p; return j }

func twoTeams() Config {
	return Config{Queues: []Queue{q("a", 2*g, "team-a"), q("b", 2*g, "team-b")}}
}

type want struct {
	admit, suspend, borrowing bool
	cap                       int
	reclaimFor                string
	reason                    string
}

func decide(t *testing.T, c Config, capacity int, jobs []Job) map[string]Decision {
	t.Helper()
	r, err := Decide(c, capacity, jobs)
	must.NoError(t, err)
	must.Eq(t, len(jobs), len(r.Jobs))
	out := map[string]Decision{}
	for i, d := range r.Jobs {
		must.Eq(t, jobs[i].ID, d.ID)
		out[d.ID] = d
	}
	return out
}

func TestDecide(t *testing.T) {
	limited := twoTeams()
	limited.Queues[1].BorrowLimit = g
	lendLimited := twoTeams()
	lendLimited.Queues[0].LendLimit = g
	weighted := Config{Queues: []Queue{q("a", 0, "team-a"), q("b", 0, "team-b")}}
	weighted.Queues[0].Weight = 2
	noReclaim := twoTeams()
	noReclaim.NoReclaim = true
	elastic := func(id, ns string, lo, hi int) Job {
		return Job{ID: id, Namespace: ns, Min: lo * g, Max: hi * g, Submitted: t0}
	}
	cases := []struct {
		name     string
		cfg      Config
		capacity int
		jobs     []Job
		want     map[string]want
	}{
		{
			name: "a gang that does not fit gets nothing; a smaller one behind it runs",
			cfg:  Config{Queues: []Queue{q("a", 4*g, "team-a")}, Default: "a"}, capacity: 4 * g,
			jobs: []Job{running(job("r", "team-a", 2, 0)), job("big", "team-a", 3, 1), job("small", "team-a", 2, 2)},
			want: map[string]want{"r": {admit: true, cap: 2 * g}, "big": {reason: "whole minimum does not fit"}, "small": {admit: true, cap: 2 * g}},
		},
		{
			name: "inside a queue: priority first, then submission",
			cfg:  twoTeams(), capacity: 4 * g,
			jobs: []Job{running(job("b", "team-b", 2, 0)), job("early", "team-a", 2, 0), withPrio(job("urgent", "team-a", 2, 5), 80)},
			want: map[string]want{"urgent": {admit: true, cap: 2 * g}, "early": {}},
		},
		{
			name: "inside a queue: the policy's rank among equal priorities",
			cfg:  twoTeams(), capacity: 4 * g,
			jobs: []Job{running(job("b", "team-b", 2, 0)), {ID: "first", Namespace: "team-a", Min: 2 * g, Rank: 5}, {ID: "ranked", Namespace: "team-a", Min: 2 * g, Rank: 1, Submitted: t0.Add(time.Hour)}},
			want: map[string]want{"ranked": {admit: true, cap: 2 * g}, "first": {}},
		},
		{
			name: "idle guarantee is lent",
			cfg:  twoTeams(), capacity: 4 * g,
			jobs: []Job{job("b1", "team-b", 2, 0), job("b2", "team-b", 2, 1)},
			want: map[string]want{"b1": {admit: true, cap: 2 * g}, "b2": {admit: true, borrowing: true, cap: 2 * g, reason: "borrowing"}},
		},
		{
			name: "borrowing limit",
			cfg:  limited, capacity: 4 * g,
			jobs: []Job{job("b1", "team-b", 2, 0), job("b2", "team-b", 2, 1), job("b3", "team-b", 1, 2)},
			want: map[string]want{"b1": {admit: true, cap: 2 * g}, "b2": {}, "b3": {admit: true, borrowing: true, cap: g}},
		},
		{
			name: "lending limit",
			cfg:  lendLimited, capacity: 4 * g,
			jobs: []Job{job("b1", "team-b", 2, 0), job("b2", "team-b", 2, 1), job("b3", "team-b", 1, 2)},
			want: map[string]want{"b1": {admit: true, cap: 2 * g}, "b2": {}, "b3": {admit: true, borrowing: true, cap: g}},
		},
		{
			name: "leftovers shared by weight",
			cfg:  weighted, capacity: 3 * g,
			jobs: []Job{job("a1", "team-a", 1, 0), job("a2", "team-a", 1, 1), job("a3", "team-a", 1, 2),
				job("b1", "team-b", 1, 0), job("b2", "team-b", 1, 1)},
			want: map[string]want{"a1": {admit: true, borrowing: true, cap: g}, "a2": {admit: true, borrowing: true, cap: g}, "a3": {},
				"b1": {admit: true, borrowing: true, cap: g}, "b2": {}},
		},
		{
			name: "reclaim: a queue below its guarantee takes its GPUs back",
			cfg:  twoTeams(), capacity: 4 * g,
			jobs: []Job{running(job("b1", "team-b", 2, 0)), running(job("b2", "team-b", 2, 1)), job("a1", "team-a", 2, 2)},
			want: map[string]want{"b1": {admit: true, cap: 2 * g}, "a1": {admit: true, cap: 2 * g, reason: "reclaiming 1"},
				"b2": {suspend: true, reclaimFor: "a", reason: "reclaimed: queue a"}},
		},
		{
			name: "reclaim takes the lowest priority borrower first",
			cfg:  Config{Queues: []Queue{q("a", 2*g, "team-a"), q("b", 0, "team-b")}}, capacity: 3 * g,
			jobs: []Job{withPrio(running(job("hi", "team-b", 1, 0)), 70), withPrio(running(job("lo", "team-b", 1, 1)), 20),
				withPrio(running(job("mid", "team-b", 1, 2)), 50), job("a1", "team-a", 1, 3)},
			want: map[string]want{"hi": {admit: true, borrowing: true, cap: g}, "mid": {admit: true, borrowing: true, cap: g},
				"lo": {suspend: true, reclaimFor: "a"}, "a1": {admit: true, cap: g}},
		},
		{
			name: "reclaim takes the least progress lost among equal priorities",
			cfg:  Config{Queues: []Queue{q("a", 2*g, "team-a"), q("b", 0, "team-b")}}, capacity: 3 * g,
			jobs: []Job{
				{ID: "old", Namespace: "team-b", Min: g, Held: g, SinceResume: 20 * time.Minute},
				{ID: "fresh", Namespace: "team-b", Min: g, Held: g, SinceResume: time.Minute, Submitted: t0.Add(time.Minute)},
				{ID: "mid", Namespace: "team-b", Min: g, Held: g, SinceResume: 5 * time.Minute, Submitted: t0.Add(2 * time.Minute)},
				job("a1", "team-a", 1, 3)},
			want: map[string]want{"old": {admit: true, borrowing: true, cap: g}, "mid": {admit: true, borrowing: true, cap: g},
				"fresh": {suspend: true, reclaimFor: "a"}, "a1": {admit: true, cap: g}},
		},
		{
			// "old" resumed 20 min ago but committed a checkpoint 30 s ago:
			// it loses least, so it goes, not "fresh" (1 min since resume,
			// no checkpoint known).
			name: "reclaim reads the last checkpoint when known",
			cfg:  Config{Queues: []Queue{q("a", 2*g, "team-a"), q("b", 0, "team-b")}}, capacity: 3 * g,
			jobs: []Job{
				{ID: "old", Namespace: "team-b", Min: g, Held: g, SinceResume: 20 * time.Minute, SinceCheckpoint: 30 * time.Second, CheckpointKnown: true},
				{ID: "fresh", Namespace: "team-b", Min: g, Held: g, SinceResume: time.Minute, Submitted: t0.Add(time.Minute)},
				{ID: "mid", Namespace: "team-b", Min: g, Held: g, SinceResume: 5 * time.Minute, Submitted: t0.Add(2 * time.Minute)},
				job("a1", "team-a", 1, 3)},
			want: map[string]want{"fresh": {admit: true, borrowing: true, cap: g}, "mid": {admit: true, borrowing: true, cap: g},
				"old": {suspend: true, reclaimFor: "a"}, "a1": {admit: true, cap: g}},
		},
		{
			// Lowest priority goes first even when it has lost more.
			name: "reclaim: priority before progress lost",
			cfg:  Config{Queues: []Queue{q("a", 2*g, "team-a"), q("b", 0, "team-b")}}, capacity: 3 * g,
			jobs: []Job{
				{ID: "lo", Namespace: "team-b", Priority: 10, Min: g, Held: g, SinceResume: 3 * time.Hour},
				{ID: "fresh", Namespace: "team-b", Priority: 50, Min: g, Held: g, SinceResume: time.Second, Submitted: t0.Add(time.Minute)},
				{ID: "mid", Namespace: "team-b", Priority: 50, Min: g, Held: g, SinceResume: time.Minute, Submitted: t0.Add(2 * time.Minute)},
				job("a1", "team-a", 1, 3)},
			want: map[string]want{"fresh": {admit: true, borrowing: true, cap: g}, "mid": {admit: true, borrowing: true, cap: g},
				"lo": {suspend: true, reclaimFor: "a"}, "a1": {admit: true, cap: g}},
		},
		{
			name: "a job that opts out of preemption never borrows",
			cfg:  twoTeams(), capacity: 4 * g,
			jobs: []Job{running(job("b1", "team-b", 2, 0)), {ID: "b2", Namespace: "team-b", Min: 2 * g, NoPreempt: true, Submitted: t0.Add(time.Minute)}},
			want: map[string]want{"b1": {admit: true, cap: 2 * g}, "b2": {reason: "opts out of preemption"}},
		},
		{
			name: "a job that opts out runs within its guarantee",
			cfg:  twoTeams(), capacity: 4 * g,
			jobs: []Job{{ID: "b1", Namespace: "team-b", Min: 2 * g, NoPreempt: true}},
			want: map[string]want{"b1": {admit: true, cap: 2 * g}},
		},
		{
			name: "borrowing without preemption: the owner waits",
			cfg:  noReclaim, capacity: 4 * g,
			jobs: []Job{running(job("b1", "team-b", 2, 0)), running(job("b2", "team-b", 2, 1)), job("a1", "team-a", 2, 2)},
			want: map[string]want{"b1": {admit: true, cap: 2 * g}, "b2": {admit: true, borrowing: true, cap: 2 * g}, "a1": {}},
		},
		{
			name: "nothing is suspended when the borrowers cannot make room",
			cfg:  Config{Queues: []Queue{q("a", 4*g, "team-a"), q("b", 0, "team-b")}}, capacity: 4 * g,
			jobs: []Job{running(job("a0", "team-a", 2, 0)), running(job("b1", "team-b", 1, 0)), {ID: "bx", Namespace: "team-b", Min: g, Held: g, NoPreempt: true},
				job("a1", "team-a", 2, 1)},
			want: map[string]want{"a0": {admit: true, cap: 2 * g}, "b1": {admit: true, borrowing: true, cap: g},
				"bx": {admit: true, borrowing: true, cap: g}, "a1": {}},
		},
		{
			name: "elastic jobs grow into their own guarantee, then what others lend",
			cfg:  twoTeams(), capacity: 5 * g,
			jobs: []Job{elastic("a1", "team-a", 1, 8), elastic("b1", "team-b", 1, 1)},
			want: map[string]want{"a1": {admit: true, cap: 4 * g}, "b1": {admit: true, cap: g}},
		},
		{
			name: "a running job keeps its place ahead of a higher-priority newcomer",
			cfg:  twoTeams(), capacity: 4 * g,
			jobs: []Job{running(job("b", "team-b", 2, 0)), running(job("r", "team-a", 2, 0)), withPrio(job("new", "team-a", 2, 1), 90)},
			want: map[string]want{"r": {admit: true, cap: 2 * g}, "new": {}},
		},
		{
			name: "unknown namespaces go to the default queue and borrow",
			cfg:  twoTeams(), capacity: 4 * g,
			jobs: []Job{job("x", "elsewhere", 1, 0)},
			want: map[string]want{"x": {admit: true, borrowing: true, cap: g}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := decide(t, tc.cfg, tc.capacity, tc.jobs)
			for id, w := range tc.want {
				d := got[id]
				must.Eq(t, w.admit, d.Admit, must.Sprintf("%s admit: %+v", id, d))
				must.Eq(t, w.suspend, d.Suspend, must.Sprintf("%s suspend: %+v", id, d))
				must.Eq(t, w.borrowing, d.Borrowing, must.Sprintf("%s borrowing: %+v", id, d))
				must.Eq(t, w.cap, d.Cap, must.Sprintf("%s cap: %+v", id, d))
				must.Eq(t, w.reclaimFor, d.ReclaimFor, must.Sprintf("%s reclaim: %+v", id, d))
				must.StrContains(t, d.Reason, w.reason, must.Sprintf("%s reason", id))
			}
		})
	}
}

func TestDecideQueueStates(t *testing.T) {
	r, err := Decide(twoTeams(), 4*g, []Job{running(job("b1", "team-b", 2, 0)), running(job("b2", "team-b", 2, 1)), job("a1", "team-a", 2, 2), job("a2", "team-a", 2, 3)})
	must.NoError(t, err)
	must.Eq(t, []QueueState{
		{Name: "a", Guarantee: 2 * g, Used: 2 * g, Waiting: 1, Reclaims: 1},
		{Name: "b", Guarantee: 2 * g, Used: 2 * g, Waiting: 1},
		{Name: DefaultName},
	}, r.Queues)

	r, err = Decide(twoTeams(), 4*g, []Job{job("b1", "team-b", 3, 0)})
	must.NoError(t, err)
	must.Eq(t, QueueState{Name: "a", Guarantee: 2 * g, Lent: g}, r.Queues[0])
	must.Eq(t, QueueState{Name: "b", Guarantee: 2 * g, Used: 3 * g, Borrowed: g}, r.Queues[1])
}

func TestDecideInvalidConfig(t *testing.T) {
	_, err := Decide(Config{Queues: []Queue{q("a", 5*g, "x")}}, 4*g, nil)
	must.ErrorIs(t, err, ErrInvalid)
	must.ErrorContains(t, err, `queue "a": guarantee`)
}
