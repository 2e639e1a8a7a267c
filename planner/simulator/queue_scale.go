package simulator

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/queue"
)

// QueueScaleInput is ScaleInput spread over queues: job i is in namespace
// and queue i mod queues, every queue guaranteed an equal part of the
// cluster; every fourth job is a gang (all its workers or none). Jobs of
// every tenth queue arrived after the previous round, so those queues are
// below their guarantees while others borrow: the round reclaims.
func QueueScaleInput(jobs, queues, nodes int) (policy.Input, queue.Config, []queue.Job, int) {
	in := ScaleInput(jobs, nodes, 1)
	capacity := nodes * 4 * policy.MilliGPU
	c := queue.Config{}
	for q := 0; q < queues; q++ {
		ns := fmt.Sprintf("team-%04d", q)
		c.Queues = append(c.Queues, queue.Queue{Name: ns, Namespaces: []string{ns}, Guarantee: capacity / queues,
			BorrowLimit: queue.Unlimited, LendLimit: queue.Unlimited, Weight: 1})
	}
	for i := range in.Jobs {
		if i%4 == 0 {
			in.Jobs[i].Min, in.Jobs[i].Gang = in.Jobs[i].Max, true
		}
	}
	qjobs := make([]queue.Job, len(in.Jobs))
	for i := range in.Jobs {
		qjobs[i] = queue.FromPolicy(&in.Jobs[i], fmt.Sprintf("team-%04d", i%queues), "")
		qjobs[i].SinceResume = time.Duration(i%600) * time.Second
	}
	return in, c, qjobs, capacity
}

// QueueScaleRound is one planning round with queues at scale, ready to
// run: Run is the round the live planner runs (queue.Plan: the policy's
// rank, the queues' admission and reclaim, the policy on what they
// admitted), on a steady state.
type QueueScaleRound struct {
	policy   string
	c        queue.Config
	in       policy.Input
	qjobs    []queue.Job
	capacity int
}

// NewQueueScaleRound builds QueueScaleInput's steady state: the previous
// round's admitted jobs hold their plan, except the late queues' (every
// tenth), whose jobs are new, so the round reclaims for them.
func NewQueueScaleRound(name string, jobs, queues, nodes int) (*QueueScaleRound, error) {
	in, c, qjobs, capacity := QueueScaleInput(jobs, queues, nodes)
	p, err := policy.New(name)
	if err != nil {
		return nil, err
	}
	early := make([]int, 0, len(in.Jobs))
	for i := range in.Jobs {
		if (i%queues)%10 != 0 {
			early = append(early, i)
		}
	}
	warm := policy.Input{Now: in.Now, Cluster: in.Cluster}
	var wq []queue.Job
	for _, i := range early {
		warm.Jobs = append(warm.Jobs, in.Jobs[i])
		wq = append(wq, qjobs[i])
	}
	_, plan, err := queue.Plan(p, c, warm, wq)
	if err != nil {
		return nil, err
	}
	for k, jp := range plan.Jobs {
		i := early[k]
		in.Jobs[i].Current = jp.Allocation
		_, _, qjobs[i].Held = queue.Demand(&in.Jobs[i])
	}
	return &QueueScaleRound{policy: name, c: c, in: in, qjobs: qjobs, capacity: capacity}, nil
}

// Decide runs the queue decision alone and returns how many jobs it
// reclaimed.
func (r *QueueScaleRound) Decide() (int, error) {
	d, err := queue.Decide(r.c, r.capacity, r.qjobs)
	n := 0
	for _, j := range d.Jobs {
		if j.ReclaimFor != "" {
			n++
		}
	}
	return n, err
}

// Run runs the whole round with a fresh policy (a policy may keep state
// between rounds).
func (r *QueueScaleRound) Run() error {
	p, err := policy.New(r.policy)
	if err != nil {
		return err
	}
	_, _, err = queue.Plan(p, r.c, r.in, r.qjobs)
	return err
}

// TimeQueueRound measures one planning round with queues on
// NewQueueScaleRound's steady state: the median of runs of the queue
// decision alone and of the whole round, and the jobs the round reclaimed.
func TimeQueueRound(name string, jobs, queues, nodes, runs int) (decide, whole time.Duration, reclaimed int, err error) {
	r, err := NewQueueScaleRound(name, jobs, queues, nodes)
	if err != nil {
		return 0, 0, 0, err
	}
	var ds, ws []time.Duration
	for k := 0; k < runs; k++ {
		t0 := time.Now()
		if reclaimed, err = r.Decide(); err != nil {
			return 0, 0, 0, err
		}
		ds = append(ds, time.Since(t0))
		t0 = time.Now()
		if err := r.Run(); err != nil {
			return 0, 0, 0, err
		}
		ws = append(ws, time.Since(t0))
	}
	return median(ds), median(ws), reclaimed, nil
}

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(a, b int) bool { return ds[a] < ds[b] })
	return ds[len(ds)/2]
}

// PrintQueueScale prints the queue round's cost at 25k, 50k and 100k jobs
// in 1,000 queues on 32,000 nodes, and the 100k/50k ratio.
func PrintQueueScale(w io.Writer, policies []string) error {
	sizes := []int{25000, 50000, 100000}
	fmt.Fprintf(w, "Planning round with queues: 1,000 queues on 32,000 nodes x 4 GPUs, gangs and reclaim on (median of 3)\n")
	fmt.Fprintf(w, "%-10s %8s %14s %14s %10s\n", "policy", "jobs", "queue decide", "whole round", "reclaimed")
	for _, p := range policies {
		got := map[int]time.Duration{}
		for _, n := range sizes {
			d, whole, rec, err := TimeQueueRound(p, n, 1000, 32000, 3)
			if err != nil {
				return err
			}
			got[n] = whole
			fmt.Fprintf(w, "%-10s %8d %14s %14s %10d\n", p, n, d.Round(time.Millisecond), whole.Round(time.Millisecond), rec)
		}
		fmt.Fprintf(w, "%-10s 100k/50k whole-round time ratio %.2f (2.00 is linear)\n", p, float64(got[100000])/float64(got[50000]))
	}
	return nil
}
