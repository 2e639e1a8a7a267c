package queue

import (
	"fmt"

	"github.com/caravan-nomad/caravan/planner/policy"
)

// SetRanks fills each job's Rank with the policy's order of in.Jobs (jobs
// in the same order) when p is a policy.Ranker; otherwise it leaves them
// alone (submission order breaks the tie after Nomad priority).
func SetRanks(p policy.Policy, in policy.Input, jobs []Job) {
	rk, ok := p.(policy.Ranker)
	if !ok {
		return
	}
	for i, v := range rk.Rank(in) {
		jobs[i].Rank = v
	}
}

// Capacity is the cluster's GPUs in milli units.
func Capacity(c policy.Cluster) int {
	total := 0
	for _, n := range c.Nodes {
		total += n.GPUs * policy.MilliGPU
	}
	return total
}

// Allocate runs p on the jobs r admitted, each capped by its queue
// (Constrain), and spreads the plan back over every job of in: a job the
// queues hold back is planned at zero (a suspend if it runs), with the
// queues' reason. Every reason names the job's queue.
func Allocate(p policy.Policy, in policy.Input, r Round) (policy.Plan, error) {
	sub, kept := Constrain(in, r)
	plan, err := p.Allocate(sub)
	if err != nil {
		return plan, err
	}
	full := make([]policy.JobPlan, len(in.Jobs))
	for i, j := range in.Jobs {
		d := r.Jobs[i]
		full[i] = policy.JobPlan{ID: j.ID, Changed: j.Current.Workers > 0 || j.Current.PS > 0,
			Reason: fmt.Sprintf("queue %s: %s", d.Queue, d.Reason)}
	}
	for k, jp := range plan.Jobs {
		jp.Reason = fmt.Sprintf("queue %s: %s", r.Jobs[kept[k]].Queue, jp.Reason)
		full[kept[k]] = jp
	}
	plan.Jobs = full
	return plan, nil
}

// Plan is one planning round with team queues, as the live planner and
// every simulator engine run it: the policy's rank (SetRanks), the queues'
// admission (Decide) on in's cluster, the policy on what they admitted
// (Allocate). jobs are the queue views of in.Jobs, in the same order.
func Plan(p policy.Policy, c Config, in policy.Input, jobs []Job) (Round, policy.Plan, error) {
	SetRanks(p, in, jobs)
	r, err := Decide(c, Capacity(in.Cluster), jobs)
	if err != nil {
		return r, policy.Plan{}, err
	}
	plan, err := Allocate(p, in, r)
	return r, plan, err
}
