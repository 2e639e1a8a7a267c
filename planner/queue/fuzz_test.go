package queue

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// FuzzDecide checks Decide's invariants on random queues and jobs: the
// admitted minimums and the caps fit the cluster; every admitted job gets
// at least its minimum and at most its maximum; a job that opts out of
// preemption is never suspended while its queue keeps its guarantee and
// never borrows; nothing is suspended without reclaim but for capacity;
// no queue passes its borrowing limit with jobs it newly admitted; on a
// cluster smaller than the guarantees (a lost node), the guarantees in
// force add up to the live cluster exactly and none grows.
func FuzzDecide(f *testing.F) {
	for _, s := range []uint64{1, 2, 3, 42, 1000} {
		f.Add(s, uint8(3), uint8(20), uint16(16), false)
	}
	f.Fuzz(func(t *testing.T, seed uint64, nq, nj uint8, gpus uint16, noReclaim bool) {
		r := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
		capacity := (int(gpus)%64 + 1) * g
		c := Config{NoReclaim: noReclaim}
		left := capacity
		for q := 0; q < int(nq)%6+1; q++ {
			gq := r.IntN(left/g+1) * g
			left -= gq
			qq := Queue{Name: fmt.Sprintf("q%d", q), Namespaces: []string{fmt.Sprintf("ns%d", q)}, Guarantee: gq,
				BorrowLimit: Unlimited, LendLimit: Unlimited, Weight: float64(r.IntN(3) + 1)}
			if r.IntN(3) == 0 {
				qq.BorrowLimit = r.IntN(4) * g
			}
			if r.IntN(3) == 0 {
				qq.LendLimit = r.IntN(gq/g+1) * g
			}
			c.Queues = append(c.Queues, qq)
		}
		if r.IntN(3) == 0 {
			capacity = r.IntN(capacity/g+1) * g // nodes lost
		}
		jobs := make([]Job, int(nj)%60)
		held := 0
		for i := range jobs {
			lo := (r.IntN(4) + 1) * g / (1 + r.IntN(2))
			j := Job{ID: fmt.Sprintf("j%d", i), Namespace: fmt.Sprintf("ns%d", r.IntN(len(c.Queues)+1)), Priority: r.IntN(3),
				Submitted: t0.Add(time.Duration(r.IntN(100)) * time.Minute), Min: lo, Max: lo * (1 + r.IntN(3)),
				NoPreempt: r.IntN(5) == 0, SinceResume: time.Duration(r.IntN(600)) * time.Second,
				SinceCheckpoint: time.Duration(r.IntN(600)) * time.Second, CheckpointKnown: r.IntN(2) == 0}
			if r.IntN(2) == 0 && held+lo <= capacity {
				j.Held = lo
				held += lo
			}
			jobs[i] = j
		}
		round, err := Decide(c, capacity, jobs)
		if err != nil {
			t.Fatalf("valid config refused: %v", err)
		}
		mins, caps := 0, 0
		for i, d := range round.Jobs {
			j := jobs[i]
			if d.Admit {
				mins += j.Min
				caps += d.Cap
				if d.Cap < j.Min || d.Cap > max(j.Max, j.Min) {
					t.Fatalf("%s: cap %d outside [%d, %d]", j.ID, d.Cap, j.Min, j.Max)
				}
				if d.Suspend {
					t.Fatalf("%s: admitted and suspended", j.ID)
				}
			} else if d.Cap != 0 {
				t.Fatalf("%s: not admitted with cap %d", j.ID, d.Cap)
			}
			if d.Suspend && j.Held == 0 {
				t.Fatalf("%s: suspended while holding nothing", j.ID)
			}
			if d.ReclaimFor != "" && (noReclaim || j.NoPreempt) {
				t.Fatalf("%s: reclaimed (no reclaim %v, no preempt %v)", j.ID, noReclaim, j.NoPreempt)
			}
			if j.NoPreempt && d.Borrowing && j.Held == 0 {
				t.Fatalf("%s: opts out of preemption but borrows", j.ID)
			}
		}
		if mins > capacity || caps > capacity {
			t.Fatalf("admitted %d (caps %d) on %d", mins, caps, capacity)
		}
		used, kept := map[string]int{}, map[string]int{}
		for i, d := range round.Jobs {
			if d.Admit {
				used[d.Queue] += jobs[i].Min
				if jobs[i].Held > 0 {
					kept[d.Queue] += jobs[i].Min
				}
			}
		}
		configured, effective := 0, 0
		for k, q := range c.Queues {
			st := round.Queues[k]
			configured += st.Guarantee
			effective += st.Effective
			if st.Guarantee != q.Guarantee || st.Effective > q.Guarantee {
				t.Fatalf("queue %s: guarantee %d in force of %d configured, reported %d", q.Name, st.Effective, q.Guarantee, st.Guarantee)
			}
			if q.BorrowLimit != Unlimited && used[q.Name]-st.Effective > max(q.BorrowLimit, kept[q.Name]-st.Effective) {
				t.Fatalf("queue %s uses %d, guarantee %d, borrowing limit %d", q.Name, used[q.Name], st.Effective, q.BorrowLimit)
			}
		}
		if want := min(configured, capacity); effective != want || round.Guarantees.Effective != want {
			t.Fatalf("guarantees in force add up to %d (reported %d), want %d: configured %d on %d",
				effective, round.Guarantees.Effective, want, configured, capacity)
		}
	})
}
