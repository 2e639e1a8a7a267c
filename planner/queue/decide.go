package queue

import (
	"container/heap"
	"fmt"
	"sort"
	"time"
)

// Job is one job as the queues see it. GPU amounts are in milli-GPUs.
type Job struct {
	ID        string
	Namespace string
	// Requested is the job's MetaKey meta ("" for none).
	Requested string
	Priority  int // Nomad job priority: higher first inside a queue
	// Rank is the active allocation policy's order among jobs of equal
	// priority (lower first; 0 for all: submission order). SetRanks fills
	// it from a policy.Ranker.
	Rank      float64
	Submitted time.Time
	// Min is the gang minimum (all of it or nothing); Max the most the
	// job can use (Max < Min means Min).
	Min, Max int
	// Held is what the job holds now (0: waiting or suspended).
	Held int
	// NoPreempt: the job may never be suspended, so it never borrows.
	NoPreempt bool
	// SinceResume is how long the job has run since it last started or
	// resumed: the progress a suspension loses when no checkpoint of it is
	// known (ProgressLost).
	SinceResume time.Duration
	// SinceCheckpoint is the time since the job's last committed
	// checkpoint, read only when CheckpointKnown: the live planner may pass
	// it from the driver, the simulator models it.
	SinceCheckpoint time.Duration
	CheckpointKnown bool
}

// ProgressLost is the progress a suspension of the job would lose: the
// time since its last checkpoint when known, else since it last started
// or resumed (at most that either way: a checkpoint older than the resume
// is the one it resumed from). Reclaim suspends, among borrowers of equal
// priority, the least first.
func (j *Job) ProgressLost() time.Duration {
	if j.CheckpointKnown {
		return max(min(j.SinceCheckpoint, j.SinceResume), 0)
	}
	return max(j.SinceResume, 0)
}

// Decision is one job's verdict for a round.
type Decision struct {
	ID    string `json:"id"`
	Queue string `json:"queue"`
	// Admit: the job may run, with at least Min and at most Cap GPUs.
	Admit bool `json:"admit"`
	Cap   int  `json:"cap_gpu_milli"`
	// Borrowing: admitted beyond its queue's guarantee (may be reclaimed).
	Borrowing bool `json:"borrowing"`
	// Suspend: the job holds GPUs now and is not admitted: checkpoint-
	// suspend it. ReclaimFor names the queue that asked for the GPUs.
	Suspend    bool   `json:"suspend"`
	ReclaimFor string `json:"reclaim_for,omitempty"`
	Reason     string `json:"reason"`
}

// QueueState is one queue's standing after a round (milli-GPUs).
type QueueState struct {
	Name string `json:"name"`
	// Guarantee is the guarantee as configured; Effective the one in
	// force this round (scaled down when the guarantees add up to more
	// than the live cluster, EffectiveGuarantees). Borrowed and Lent are
	// counted against Effective.
	Guarantee int `json:"guarantee"`
	Effective int `json:"effective_guarantee"`
	Used      int `json:"used"`     // admitted minimums plus caps' extras
	Borrowed  int `json:"borrowed"` // used beyond the guarantee in force
	Lent      int `json:"lent"`     // idle guarantee in use by others
	Waiting   int `json:"waiting"`  // jobs not admitted
	Reclaims  int `json:"reclaims"` // borrowers suspended for this queue
}

// Round is Decide's answer: one Decision per job, in input order, one
// QueueState per queue (the implicit default queue last), and how the
// guarantees fit the live cluster.
type Round struct {
	Jobs       []Decision   `json:"jobs"`
	Queues     []QueueState `json:"queues"`
	Guarantees Guarantees   `json:"guarantees"`
}

// qstate is a queue during a round.
type qstate struct {
	Queue            // Guarantee and LendLimit as in force this round
	configured int   // the guarantee as configured
	jobs       []int // job indices in queue order
	used       int   // admitted minimums
	extra      int   // caps beyond minimums
	reclaims   int
	next       int // phase 3 cursor into jobs
	admittedAt []int
}

func (q *qstate) idle() int { return max(q.Guarantee-q.used, 0) }

// reserved is the idle guarantee others may not borrow.
func (q *qstate) reserved() int {
	if q.LendLimit == Unlimited {
		return 0
	}
	return max(q.idle()-q.LendLimit, 0)
}

// mayBorrow reports whether the queue may use d more without passing its
// borrowing limit.
func (q *qstate) mayBorrow(d int) bool {
	return q.BorrowLimit == Unlimited || q.used+d-q.Guarantee <= q.BorrowLimit
}

// round is Decide's working state.
type round struct {
	jobs       []Job
	qs         []*qstate
	of         []int // queue of each job
	dec        []Decision
	free       int // capacity less admitted minimums
	capacity   int
	reserved   int // sum of the queues' reserved()
	guarantees Guarantees
}

// Decide runs one round of the queues over jobs on a cluster of capacity
// milli-GPUs. Guarantees that add up to more than capacity are scaled to
// it (EffectiveGuarantees). It returns an error only for an invalid config.
func Decide(c Config, capacity int, jobs []Job) (Round, error) {
	if err := c.Validate(); err != nil {
		return Round{}, err
	}
	r := newRound(c, capacity, jobs)
	r.admitGuaranteed()
	if !c.NoReclaim {
		r.reclaim()
	}
	r.borrow()
	r.caps()
	return r.result(), nil
}

func newRound(c Config, capacity int, jobs []Job) *round {
	qs, def := c.withDefault()
	a := newAssigner(qs, def)
	r := &round{jobs: jobs, of: make([]int, len(jobs)), dec: make([]Decision, len(jobs)), free: capacity, capacity: capacity}
	eff, g := EffectiveGuarantees(qs, capacity)
	r.guarantees = g
	for k, q := range qs {
		if q.Weight <= 0 {
			q.Weight = 1
		}
		st := &qstate{Queue: q, configured: q.Guarantee}
		st.Guarantee = eff[k]
		if st.LendLimit != Unlimited {
			// Never lend more than the guarantee in force.
			st.LendLimit = min(st.LendLimit, st.Guarantee)
		}
		r.qs = append(r.qs, st)
	}
	for i := range jobs {
		qi, why := a.assign(jobs[i].Namespace, jobs[i].Requested)
		r.of[i] = qi
		r.dec[i] = Decision{ID: jobs[i].ID, Queue: qs[qi].Name, Reason: why}
		r.qs[qi].jobs = append(r.qs[qi].jobs, i)
	}
	for _, q := range r.qs {
		sort.SliceStable(q.jobs, func(x, y int) bool { return before(&jobs[q.jobs[x]], &jobs[q.jobs[y]]) })
	}
	return r
}

// before is the order inside a queue: Nomad priority, the policy's rank,
// submission, ID.
func before(a, b *Job) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if a.Rank != b.Rank {
		return a.Rank < b.Rank
	}
	if !a.Submitted.Equal(b.Submitted) {
		return a.Submitted.Before(b.Submitted)
	}
	return a.ID < b.ID
}

func (r *round) admit(i int, why string) {
	q := r.qs[r.of[i]]
	j := &r.jobs[i]
	d := &r.dec[i]
	d.Admit, d.Cap = true, j.Min
	d.Borrowing = q.used+j.Min > q.Guarantee
	d.Reason = join(d.Reason, why)
	r.free -= j.Min
	r.reserved -= q.reserved()
	q.used += j.Min
	r.reserved += q.reserved()
	q.admittedAt = append(q.admittedAt, i)
}

// admitGuaranteed keeps every running job (in queue order, while the
// cluster holds them) and admits waiting jobs that fit in their queue's
// guarantee and in the free GPUs.
func (r *round) admitGuaranteed() {
	for _, q := range r.qs {
		r.reserved += q.reserved()
	}
	for _, q := range r.qs {
		for _, i := range q.jobs {
			if j := &r.jobs[i]; j.Held > 0 {
				if j.Min <= r.free {
					r.admit(i, "keeps running")
				} else {
					r.dec[i].Reason = join(r.dec[i].Reason, "suspended: the cluster no longer holds its minimum")
				}
			}
		}
	}
	for _, q := range r.qs {
		for _, i := range q.jobs {
			j := &r.jobs[i]
			if j.Held == 0 && q.used+j.Min <= q.Guarantee && j.Min <= r.free {
				r.admit(i, fmt.Sprintf("admitted within queue %s's guarantee", q.Name))
			}
		}
	}
}

// borrowers lists the running jobs admitted beyond their queue's guarantee
// that may be suspended: lowest priority first, then least progress lost.
func (r *round) borrowers() []int {
	var out []int
	for _, q := range r.qs {
		cum := 0
		for _, i := range q.admittedAt {
			j := &r.jobs[i]
			cum += j.Min
			if cum > q.Guarantee && j.Held > 0 && !j.NoPreempt {
				out = append(out, i)
			}
		}
	}
	sort.SliceStable(out, func(a, b int) bool {
		ja, jb := &r.jobs[out[a]], &r.jobs[out[b]]
		if ja.Priority != jb.Priority {
			return ja.Priority < jb.Priority
		}
		if la, lb := ja.ProgressLost(), jb.ProgressLost(); la != lb {
			return la < lb
		}
		return before(jb, ja)
	})
	return out
}

// reclaim suspends borrowers for waiting jobs that fit in their queue's
// guarantee but not in the free GPUs, highest priority first. Nothing is
// suspended for a job the borrowers together cannot make room for.
func (r *round) reclaim() {
	var needs []int
	for _, q := range r.qs {
		for _, i := range q.jobs {
			if j := &r.jobs[i]; !r.dec[i].Admit && j.Held == 0 && q.used+j.Min <= q.Guarantee {
				needs = append(needs, i)
			}
		}
	}
	if len(needs) == 0 {
		return
	}
	sort.SliceStable(needs, func(a, b int) bool { return before(&r.jobs[needs[a]], &r.jobs[needs[b]]) })
	victims := r.borrowers()
	gone := make(map[int]bool)
	for _, i := range needs {
		q := r.qs[r.of[i]]
		j := &r.jobs[i]
		if q.used+j.Min > q.Guarantee {
			continue
		}
		if j.Min <= r.free {
			r.admit(i, fmt.Sprintf("admitted within queue %s's guarantee", q.Name))
			continue
		}
		var pick []int
		freed := r.free
		for _, v := range victims {
			if gone[v] || r.of[v] == r.of[i] {
				continue
			}
			if vq := r.qs[r.of[v]]; vq.used <= vq.Guarantee {
				continue
			}
			pick = append(pick, v)
			freed += r.jobs[v].Min
			if freed >= j.Min {
				break
			}
		}
		if freed < j.Min {
			continue
		}
		for _, v := range pick {
			r.suspend(v, q.Name)
			gone[v] = true
		}
		q.reclaims += len(pick)
		r.admit(i, fmt.Sprintf("admitted within queue %s's guarantee after reclaiming %d borrowed job(s)", q.Name, len(pick)))
	}
}

// suspend withdraws v's admission for queue asker.
func (r *round) suspend(v int, asker string) {
	q := r.qs[r.of[v]]
	j := &r.jobs[v]
	d := &r.dec[v]
	d.Admit, d.Cap, d.Borrowing = false, 0, false
	d.ReclaimFor = asker
	d.Reason = fmt.Sprintf("reclaimed: queue %s is below its guarantee and has a waiting job; checkpoint-suspended", asker)
	r.free += j.Min
	r.reserved -= q.reserved()
	q.used -= j.Min
	r.reserved += q.reserved()
	for k, a := range q.admittedAt {
		if a == v {
			q.admittedAt = append(q.admittedAt[:k], q.admittedAt[k+1:]...)
			break
		}
	}
}

// pool is what q may still take beyond its guarantee: the free GPUs less
// the idle guarantee other queues do not lend.
func (r *round) pool(q *qstate) int {
	return min(r.free, r.free-r.reserved+q.reserved())
}

// borrow admits waiting jobs beyond their queues' guarantees, out of idle
// and unguaranteed GPUs, always to the queue that has borrowed least for
// its weight; a job that opts out of preemption never borrows.
func (r *round) borrow() {
	h := &queueHeap{}
	for k, q := range r.qs {
		if len(q.jobs) > 0 {
			heap.Push(h, qkey{k, borrowedPerWeight(q)})
		}
	}
	for h.Len() > 0 {
		k := heap.Pop(h).(qkey).q
		q := r.qs[k]
		if i, ok := r.nextBorrower(q); ok {
			r.admit(i, fmt.Sprintf("admitted in queue %s, borrowing idle GPUs", q.Name))
			heap.Push(h, qkey{k, borrowedPerWeight(q)})
		}
	}
	for i := range r.dec {
		if d := &r.dec[i]; !d.Admit && d.ReclaimFor == "" {
			j := &r.jobs[i]
			if j.Held > 0 {
				d.Suspend = true
				continue
			}
			why := fmt.Sprintf("queued in %s: its whole minimum does not fit", d.Queue)
			if j.NoPreempt {
				why = fmt.Sprintf("queued in %s: waits for its queue's guarantee (it opts out of preemption, so it never borrows)", d.Queue)
			}
			d.Reason = join(d.Reason, why)
		}
		if d := &r.dec[i]; d.ReclaimFor != "" {
			d.Suspend = true
		}
	}
}

// nextBorrower advances q's cursor to its next waiting job that may borrow
// and fits. A job passed over never fits later in the round: the free
// GPUs only shrink and borrowing only grows.
func (r *round) nextBorrower(q *qstate) (int, bool) {
	for ; q.next < len(q.jobs); q.next++ {
		i := q.jobs[q.next]
		j := &r.jobs[i]
		if r.dec[i].Admit || r.dec[i].ReclaimFor != "" || j.NoPreempt || j.Held > 0 {
			continue
		}
		if j.Min <= r.pool(q) && q.mayBorrow(j.Min) {
			q.next++
			return i, true
		}
	}
	return 0, false
}

func borrowedPerWeight(q *qstate) float64 {
	return float64(max(q.used-q.Guarantee, 0)) / q.Weight
}

// caps hands the GPUs left after admission to admitted jobs that can use
// more than their minimum: first each queue's own idle guarantee, in queue
// order; then what others may borrow, between queues by weight (water-
// filling), inside a queue in order. A job that opts out of preemption
// grows only into its queue's guarantee.
func (r *round) caps() {
	left := r.free
	for _, q := range r.qs {
		own := q.idle()
		for _, i := range q.admittedAt {
			g := min(r.want(i), own, left)
			r.grow(i, g)
			own -= g
			left -= g
		}
	}
	for _, q := range r.qs {
		if q.LendLimit != Unlimited {
			left -= max(q.idle()-q.extra-q.LendLimit, 0)
		}
	}
	active := map[int]int{} // queue -> its unmet want
	for k, q := range r.qs {
		if w := r.queueWant(q); w > 0 {
			active[k] = w
		}
	}
	for left > 0 && len(active) > 0 {
		sum := 0.0
		for k := range active {
			sum += r.qs[k].Weight
		}
		spent := 0
		for _, k := range sortedKeys(active) {
			q := r.qs[k]
			share := max(int(float64(left)*q.Weight/sum), 1)
			g := r.spread(q, min(share, active[k], left-spent))
			spent += g
			if active[k] -= g; active[k] <= 0 || g == 0 {
				delete(active, k)
			}
			if spent >= left {
				break
			}
		}
		left -= spent
		if spent == 0 {
			break
		}
	}
}

func lendable(q *qstate) int {
	if q.LendLimit == Unlimited {
		return q.Guarantee
	}
	return q.LendLimit
}

// want is what admitted job i could still take.
func (r *round) want(i int) int {
	return max(max(r.jobs[i].Max, r.jobs[i].Min)-r.dec[i].Cap, 0)
}

func (r *round) grow(i, g int) {
	if g <= 0 {
		return
	}
	r.dec[i].Cap += g
	r.qs[r.of[i]].extra += g
}

// queueWant is what q's admitted jobs may still take beyond its guarantee.
func (r *round) queueWant(q *qstate) int {
	w := 0
	for _, i := range q.admittedAt {
		if !r.jobs[i].NoPreempt {
			w += r.want(i)
		}
	}
	if q.BorrowLimit != Unlimited {
		w = min(w, max(q.BorrowLimit-max(q.used+q.extra-q.Guarantee, 0), 0))
	}
	return w
}

// spread gives up to g to q's admitted jobs in order and returns what it gave.
func (r *round) spread(q *qstate, g int) int {
	given := 0
	for _, i := range q.admittedAt {
		if r.jobs[i].NoPreempt {
			continue
		}
		n := min(r.want(i), g-given)
		r.grow(i, n)
		given += n
		if given >= g {
			break
		}
	}
	return given
}

func (r *round) result() Round {
	out := Round{Jobs: r.dec, Guarantees: r.guarantees}
	borrowedFromGuarantees := 0
	unguaranteed := r.capacity
	idle := 0
	for _, q := range r.qs {
		unguaranteed -= q.Guarantee
		borrowedFromGuarantees += max(q.used+q.extra-q.Guarantee, 0)
		idle += min(max(q.Guarantee-q.used-q.extra, 0), lendable(q))
	}
	borrowedFromGuarantees = max(borrowedFromGuarantees-max(unguaranteed, 0), 0)
	for _, q := range r.qs {
		s := QueueState{Name: q.Name, Guarantee: q.configured, Effective: q.Guarantee, Used: q.used + q.extra, Reclaims: q.reclaims}
		s.Borrowed = max(s.Used-q.Guarantee, 0)
		if idle > 0 {
			mine := min(max(q.Guarantee-s.Used, 0), lendable(q))
			s.Lent = int(float64(borrowedFromGuarantees) * float64(mine) / float64(idle))
		}
		for _, i := range q.jobs {
			if !r.dec[i].Admit {
				s.Waiting++
			}
		}
		out.Queues = append(out.Queues, s)
	}
	return out
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return b + " (" + a + ")"
}

func sortedKeys(m map[int]int) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

type qkey struct {
	q   int
	key float64
}

type queueHeap []qkey

func (h queueHeap) Len() int { return len(h) }
func (h queueHeap) Less(a, b int) bool {
	if h[a].key != h[b].key {
		return h[a].key < h[b].key
	}
	return h[a].q < h[b].q
}
func (h queueHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *queueHeap) Push(x any)   { *h = append(*h, x.(qkey)) }
func (h *queueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
