package history

import "time"

// TimeSlice is a job's turn under time-slicing (Gandiva), as the live
// planner and the step engine both track it: a running job is protected
// for Quantum after it (re)started, then queues again from the start of its
// current slice; a waiting job queues from when it began to wait.
type TimeSlice struct {
	// Running: the job holds workers now.
	Running bool
	// Pinned: the job may not be suspended, so it stays protected.
	Pinned bool
	// Quantum is the slice (0 or less: a running job stays protected).
	Quantum time.Duration
	// Resumed is when a running job last got workers; Waiting when a
	// waiting job last lost them (or arrived).
	Resumed, Waiting time.Time
}

// Protected is the queue key of a job inside its quantum: a century before
// anchor, ahead of every job that queues by a time of its own.
func Protected(anchor time.Time) time.Time { return anchor.AddDate(-100, 0, 0) }

// QueueKey is the time a policy admits the job by (policy.Job.Submitted,
// which orders admission under overload): Protected(anchor) inside its
// quantum (or pinned), the start of its current slice past it, and when
// it began to wait while waiting. Restarts and attained service do not
// enter it: a job suspended many times still resumes in its turn.
func (s TimeSlice) QueueKey(anchor, now time.Time) time.Time {
	switch {
	case !s.Running:
		return s.Waiting
	case s.Pinned || s.Quantum <= 0 || now.Before(s.Resumed.Add(s.Quantum)):
		return Protected(anchor)
	}
	// Re-queued at the start of its current slice, so a job that has run
	// for many slices does not keep its place forever.
	slices := now.Sub(s.Resumed) / s.Quantum
	return s.Resumed.Add(slices * s.Quantum)
}
