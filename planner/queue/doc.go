// Package queue is caravan's team queues: guaranteed GPU quotas per queue,
// borrowing of idle guarantee up to limits, gang admission and reclaim by
// checkpoint-suspend. It is pure policy, like planner/policy, with no Nomad
// in it: the live planner and every simulator engine hand it the same
// state and apply the same Round.
//
// Semantics follow Kueue's ClusterQueue where they overlap: a queue's
// guarantee is Kueue's nominalQuota, BorrowLimit its borrowingLimit (how
// much more than its guarantee it may use), LendLimit its lendingLimit (how
// much of its guarantee others may use while it is idle); all queues form
// one cohort; reclaim is Kueue's reclaimWithinCohort, except that the
// borrower is checkpoint-suspended, not killed. Inside a queue, admission is
// best-effort FIFO in the queue's order (Nomad priority, then the active
// policy's rank, then submission): a job that does not fit does not block a
// smaller one behind it.
//
// Plan is one whole round as the live planner and the simulator engines
// run it: SetRanks (the active policy's order, a policy.Ranker), Decide,
// then Allocate (the policy on the admitted jobs, capped by Constrain).
//
// Guarantees above the live cluster (a node lost, drained or in
// maintenance) are no config error: Decide scales them in proportion to
// the live cluster, as YARN's capacity scheduler states guarantees as
// shares of the live cluster, and keeps deciding (EffectiveGuarantees:
// guarantee x capacity / sum, rounded down to the milli-GPU, the rest one
// each to the largest remainders, so they add up to exactly the cluster).
// Kueue instead keeps its nominal quotas and lets admitted workloads
// wait; kept as configured here, a queue that holds the whole shrunken
// cluster within its own guarantee borrows nothing, so another queue
// waiting within its guarantee would have nothing to reclaim. Borrowing
// and reclaim count against the guarantee in force; Round.Guarantees and
// QueueState.Effective report it. Validate refuses only what is wrong at
// any cluster size.
//
// Decide admits whole gang minimums (a job that cannot get its whole
// minimum gets none), caps every admitted job's GPUs so that no queue
// exceeds what it is entitled to, and names the borrowers to suspend. The
// caller feeds the admitted jobs, with their caps, to the allocation policy
// (Constrain does this for a policy.Input).
package queue
