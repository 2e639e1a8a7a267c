package engine

import (
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/queue"
)

// PlanWithQueues is one planning round of a simulator engine. Without
// queues (qc names none) it is the policy alone, exactly as before queues;
// with queues it is queue.Plan, the code the live planner runs: the
// policy's rank orders each queue, the queues admit whole minimums and
// reclaim, the policy sizes and places what they admitted, and a job held
// back is planned at zero workers. qjobs are the queue views of in.Jobs,
// in the same order (QueueView).
func PlanWithQueues(pol policy.Policy, qc queue.Config, in policy.Input, qjobs []queue.Job) (policy.Plan, *queue.Round, error) {
	if !qc.Enabled() {
		plan, err := pol.Allocate(in)
		return plan, nil, err
	}
	r, plan, err := queue.Plan(pol, qc, in, qjobs)
	if err != nil {
		return plan, nil, err
	}
	return plan, &r, nil
}

// QueueView is a simulated job as the queues see it (queue.View): in
// namespace ns, running since resumed seconds (the progress a suspension
// loses: the engines model no checkpoint but the one a suspension commits,
// which the job resumed from).
func QueueView(pj *policy.Job, ns string, now, resumed float64) queue.Job {
	return queue.View(pj, ns, "", At(now), At(resumed))
}
