package policy

// Ranker is implemented by a policy that orders jobs by something other
// than their submission. Team queues (planner/queue) order each queue's
// jobs by Nomad priority, then by Rank (lower first), then by submission,
// so a queue admits in the active policy's order. A policy without Rank
// admits in submission order (FIFO, DRF: their own admission order) or
// has no order of jobs at all (Optimus, goodput, Pollux split GPUs by
// marginal gain among whichever jobs are admitted).
type Ranker interface {
	// Rank returns one value per job of in.Jobs, lower first. It changes
	// neither in nor the policy's state.
	Rank(in Input) []float64
}

// Rank implements Ranker: Tiresias serves its high queue (attained
// service below the threshold) before its low queue.
func (t *Tiresias) Rank(in Input) []float64 {
	thr := t.Threshold
	if thr <= 0 {
		thr = TiresiasQueueThreshold
	}
	out := make([]float64, len(in.Jobs))
	for i := range in.Jobs {
		if in.Jobs[i].AttainedService >= thr {
			out[i] = 1
		}
	}
	return out
}
