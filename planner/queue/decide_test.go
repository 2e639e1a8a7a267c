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
			// Guarantees of 2+2 GPUs, the cluster down to 2: each queue's
			// guarantee is scaled to 1 GPU, and team a, waiting within it,
			// reclaims the GPU b's gang borrows (a config error before).
			name: "a lost node: an owner within its scaled guarantee reclaims",
			cfg:  twoTeams(), capacity: 2 * g,
			jobs: []Job{running(job("b1", "team-b", 2, 0)), job("a1", "team-a", 1, 1)},
			want: map[string]want{"b1": {suspend: true, reclaimFor: "a", reason: "reclaimed: queue a"},
				"a1": {admit: true, cap: g, reason: "admitted within queue a's guarantee after reclaiming 1"}},
		},
		{
			name: "a lost node: an elastic borrower shrinks to its scaled guarantee",
			cfg:  twoTeams(), capacity: 2 * g,
			jobs: []Job{{ID: "b1", Namespace: "team-b", Min: g, Max: 2 * g, Held: 2 * g}, job("a1", "team-a", 1, 1)},
			want: map[string]want{"b1": {admit: true, cap: g, reason: "keeps running"},
				"a1": {admit: true, cap: g, reason: "admitted within queue a's guarantee"}},
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
		{Name: "a", Guarantee: 2 * g, Effective: 2 * g, Used: 2 * g, Waiting: 1, Reclaims: 1},
		{Name: "b", Guarantee: 2 * g, Effective: 2 * g, Used: 2 * g, Waiting: 1},
		{Name: DefaultName},
	}, r.Queues)
	must.Eq(t, Guarantees{Capacity: 4 * g, Configured: 4 * g, Effective: 4 * g}, r.Guarantees)

	r, err = Decide(twoTeams(), 4*g, []Job{job("b1", "team-b", 3, 0)})
	must.NoError(t, err)
	must.Eq(t, QueueState{Name: "a", Guarantee: 2 * g, Effective: 2 * g, Lent: g}, r.Queues[0])
	must.Eq(t, QueueState{Name: "b", Guarantee: 2 * g, Effective: 2 * g, Used: 3 * g, Borrowed: g}, r.Queues[1])
}

// TestDecide_GuaranteesAboveTheCluster: guarantees of 2+2 GPUs on a
// cluster down to 3 are no error (the round failed with "the guarantees
// add up to ... more than the cluster's"); the round scales them to 1.5
// each, counts borrowing against that and says why.
func TestDecide_GuaranteesAboveTheCluster(t *testing.T) {
	r, err := Decide(twoTeams(), 3*g, []Job{running(job("b1", "team-b", 2, 0)), job("a1", "team-a", 1, 1)})
	must.NoError(t, err)
	must.Eq(t, []QueueState{
		{Name: "a", Guarantee: 2 * g, Effective: 1500, Used: g, Lent: 500},
		{Name: "b", Guarantee: 2 * g, Effective: 1500, Used: 2 * g, Borrowed: 500},
		{Name: DefaultName},
	}, r.Queues)
	must.Eq(t, 3*g, r.Guarantees.Capacity)
	must.Eq(t, 4*g, r.Guarantees.Configured)
	must.Eq(t, 3*g, r.Guarantees.Effective)
	must.Eq(t, g, r.Guarantees.Shortfall)
	must.True(t, r.Guarantees.Scaled())
	must.StrContains(t, r.Guarantees.Note, "the guarantees add up to 4 GPUs, more than the live cluster's 3")
	must.StrContains(t, r.Guarantees.Note, "x0.750")
}

func TestDecideInvalidConfig(t *testing.T) {
	_, err := Decide(Config{Queues: []Queue{q("a", -g, "x")}}, 4*g, nil)
	must.ErrorIs(t, err, ErrInvalid)
	must.ErrorContains(t, err, `queue "a": guarantee`)
}

func TestEffectiveGuarantees(t *testing.T) {
	qs := func(gs ...int) []Queue {
		var out []Queue
		for i, v := range gs {
			out = append(out, q(string(rune('a'+i)), v, "ns"))
		}
		return out
	}
	cases := []struct {
		name      string
		qs        []Queue
		capacity  int
		want      []int
		shortfall int
	}{
		{name: "fit: as configured", qs: qs(2*g, g, 0), capacity: 4 * g, want: []int{2 * g, g, 0}},
		{name: "exactly the cluster", qs: qs(2*g, 2*g), capacity: 4 * g, want: []int{2 * g, 2 * g}},
		{name: "one node of two lost", qs: qs(g, g), capacity: g, want: []int{500, 500}, shortfall: g},
		{name: "in proportion", qs: qs(3*g, g, 0), capacity: 2 * g, want: []int{1500, 500, 0}, shortfall: 2 * g},
		// 1000/3 each: 333 remainder 1 each; the one milli left goes to
		// the queue listed first.
		{name: "rounding never passes the cluster", qs: qs(g, g, g), capacity: g, want: []int{334, 333, 333}, shortfall: 2 * g},
		{name: "largest remainder first", qs: qs(1, 2, 4), capacity: 3, want: []int{0, 1, 2}, shortfall: 4},
		{name: "no live GPUs", qs: qs(2*g, g), capacity: 0, want: []int{0, 0}, shortfall: 3 * g},
		{name: "sums past 63 bits in the product", qs: qs(maxGPUs*g, maxGPUs*g), capacity: maxGPUs*g - 1,
			want: []int{maxGPUs * g / 2, maxGPUs*g/2 - 1}, shortfall: maxGPUs*g + 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, gs := EffectiveGuarantees(tc.qs, tc.capacity)
			must.Eq(t, tc.want, got)
			must.Eq(t, tc.shortfall, gs.Shortfall)
			sum := 0
			for _, v := range got {
				sum += v
			}
			must.Eq(t, sum, gs.Effective)
			must.Eq(t, min(tc.capacity, gs.Configured), sum)
			must.Eq(t, tc.shortfall > 0, gs.Note != "")
		})
	}
}
