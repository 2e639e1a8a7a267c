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

// queueRound is one planning round with queues: the queues decide, the
// policy sizes and places what they admitted.
func queueRound(p policy.Policy, c queue.Config, capacity int, in policy.Input, qjobs []queue.Job) (queue.Round, policy.Plan, []int, error) {
	r, err := queue.Decide(c, capacity, qjobs)
	if err != nil {
		return r, policy.Plan{}, nil, err
	}
	sub, kept := queue.Constrain(in, r)
	plan, err := p.Allocate(sub)
	return r, plan, kept, err
}

// TimeQueueRound measures one planning round with queues on a steady
// state (the previous round's admitted jobs hold their plan, except the
// late queues'): the median of runs of the queue decision alone and of the
// whole round, and the jobs the round reclaimed.
func TimeQueueRound(name string, jobs, queues, nodes, runs int) (decide, whole time.Duration, reclaimed int, err error) {
	in, c, qjobs, capacity := QueueScaleInput(jobs, queues, nodes)
	p, err := policy.New(name)
	if err != nil {
		return 0, 0, 0, err
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
	_, plan, kept, err := queueRound(p, c, capacity, warm, wq)
	if err != nil {
		return 0, 0, 0, err
	}
	for k, jp := range plan.Jobs {
		i := early[kept[k]]
		in.Jobs[i].Current = jp.Allocation
		_, _, qjobs[i].Held = queue.Demand(&in.Jobs[i])
	}
	var ds, ws []time.Duration
	for k := 0; k < runs; k++ {
		t0 := time.Now()
		r, err := queue.Decide(c, capacity, qjobs)
		ds = append(ds, time.Since(t0))
		if err != nil {
			return 0, 0, 0, err
		}
		reclaimed = 0
		for _, d := range r.Jobs {
			if d.ReclaimFor != "" {
				reclaimed++
			}
		}
		p, _ := policy.New(name)
		t0 = time.Now()
		if _, _, _, err := queueRound(p, c, capacity, in, qjobs); err != nil {
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
