package policy

// Guard is what the planner's gates (its cooldown and its time-slicing
// quantum) hold a running job to in one round, whatever the policy would
// rather do. The live planner (planner/service/manager) and the
// simulator's step replay (planner/simulator/steps/steps.go) both apply guards
// through Guarded and HoldPlan, so they agree on when a job may move.
type Guard int

const (
	// Free: the policy decides.
	Free Guard = iota
	// NoSuspend: the job runs inside its suspend quantum (or may not be
	// suspended at all): the policy may resize it but not take all its
	// workers.
	NoSuspend
	// Keep: the job is inside its cooldown: it keeps its workers and
	// parameter servers.
	Keep
)

// Guarded returns the jobs as the policy should see them: a job under
// Keep is fixed at its current workers (a gang), and every guarded job is
// served before every free one (its Priority is raised above theirs,
// keeping the guarded jobs' own order). Policies admit by Priority first,
// so a guarded job keeps its place whatever the policy's own ranking: the
// suspend quantum and the cooldown hold under every policy, not only
// under those that admit in Submitted order. jobs is not modified.
func Guarded(jobs []Job, guards []Guard) []Job {
	out := append([]Job(nil), jobs...)
	lo, hi := 0, 0
	for i, j := range jobs {
		if i == 0 || j.Priority < lo {
			lo = j.Priority
		}
		if i == 0 || j.Priority > hi {
			hi = j.Priority
		}
	}
	for i := range out {
		j := &out[i]
		if guards[i] == Free || j.Current.Workers <= 0 {
			continue
		}
		j.Priority += hi - lo + 1
		if guards[i] == Keep {
			j.Min, j.Max, j.Gang = j.Current.Workers, j.Current.Workers, true
		}
	}
	return out
}

// HoldPlan enforces the guards on a plan of Guarded jobs, for a policy
// that does not admit by Priority: a job under Keep gets its current
// workers back, and so does one under NoSuspend that the plan suspends. jobs are the
// unguarded jobs, in plan order. It returns the indices it changed.
func HoldPlan(plan *Plan, jobs []Job, guards []Guard) []int {
	var held []int
	for i := range plan.Jobs {
		jp, cur := &plan.Jobs[i], jobs[i].Current
		if cur.Workers <= 0 {
			continue
		}
		want := jp.Workers
		switch guards[i] {
		case Keep:
			want = cur.Workers
		case NoSuspend:
			if jp.Workers == 0 {
				want = cur.Workers
			}
		}
		if want == jp.Workers {
			continue
		}
		jp.Allocation = cur
		jp.Changed = !sameAllocation(cur, jp.Allocation)
		jp.Reason += "; kept running: the planner's cooldown or suspend quantum protects it"
		held = append(held, i)
	}
	return held
}

// ExploreMax is the most workers a job may be granted when its speed has
// been measured with at most measured workers (0: never): Pollux's
// exploration rule, twice the largest measured count, and at least one
// worker. A job keeps what it already asks for and never goes under its
// minimum: the rule limits growth, it does not shrink.
func ExploreMax(j Job, measured int) int {
	limit := max(2*measured, 1, j.Current.Workers, j.minWorkers())
	return min(j.maxWorkers(), limit)
}
