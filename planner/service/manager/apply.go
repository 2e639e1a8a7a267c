package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/caravan-nomad/caravan/planner/service/source"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

// Action statuses.
const (
	StatusPlanned  = "planned"
	StatusApplied  = "applied"
	StatusDeferred = "deferred"
	StatusConflict = "conflict"
	StatusFailed   = "failed"
	StatusRefused  = "refused"
)

// apply submits the round's actions when this instance leads and is not in
// dry-run, at most MaxChangesPerRound of them.
func (m *Manager) apply(ctx context.Context, s Settings, r *Round) {
	applied := 0
	for i := range r.Actions {
		a := &r.Actions[i]
		job := a.job
		if m.heldBack(s, r, a, applied) {
			continue
		}
		if !m.admits(ctx, s, r, a) {
			continue
		}
		wctx, cancel := m.fenced(ctx)
		err := m.write(wctx, r, a, job)
		cancel()
		applied++
		m.mu.Lock()
		m.recordWriteLocked(s, r, a, err)
		m.mu.Unlock()
	}
	if r.Leader && !s.DryRun && m.leads() {
		m.writeNotes(ctx, r)
	}
}

// heldBack reports whether action a is not to be written this round
// (follower, dry-run, unconfirmed leadership, rate limit, a recent refusal
// by Nomad, suspension forbidden), setting its status and verdict.
func (m *Manager) heldBack(s Settings, r *Round, a *Action, applied int) bool {
	switch {
	case !r.Leader:
		a.Status = StatusPlanned
		a.Error = "not the leader: followers only serve reads"
		a.verdict = VerdictNotLeader
		return true
	case s.DryRun:
		a.Status = StatusPlanned
		a.Error = "dry-run"
		a.verdict = VerdictDryRun
		m.log.Info("dry-run: would apply", "job", a.Job, "kind", a.Kind, "from", a.From, "to", a.To, "message", a.Message)
		return true
	case !m.leads():
		// Decided as leader, but leadership is not confirmed now (the
		// session could not be renewed): fence the write.
		a.Status = StatusPlanned
		a.Error = "leadership not confirmed now: not writing"
		a.verdict = VerdictNotLeader
		return true
	case applied >= s.MaxChangesPerRound:
		a.Status = StatusDeferred
		a.Error = fmt.Sprintf("rate limit: %d changes per round", s.MaxChangesPerRound)
		a.verdict = VerdictRateLimit
		m.mu.Lock()
		m.metrics.Deferred++
		m.mu.Unlock()
		return true
	}
	m.mu.Lock()
	until := m.memFor(a.key).refusedUntil
	m.mu.Unlock()
	if r.Time.Before(until) {
		a.Status = StatusDeferred
		a.Error = "nomad refused the last update of this job; retrying after " + until.Format(time.RFC3339)
		a.verdict = VerdictNomadRefused
		return true
	}
	if a.Kind == KindSuspend && a.job != nil && !a.job.Spec.Suspendable {
		a.Status, a.Error = StatusRefused, "job meta forbids suspension"
		a.verdict = VerdictSuspendForbidden
		return true
	}
	return false
}

// recordWriteLocked records the outcome err of writing a. m.mu is held.
func (m *Manager) recordWriteLocked(s Settings, r *Round, a *Action, err error) {
	switch {
	case err == nil:
		a.Status = StatusApplied
		m.metrics.Applied[a.Kind]++
		m.noteAppliedLocked(r, a)
	case errors.Is(err, submit.ErrConflict):
		// The job changed (a user's edit, or our own earlier write we
		// have not seen yet): decide again on the new version.
		a.Status, a.Error = StatusConflict, err.Error()
		m.metrics.Conflicts++
		m.log.Info("job changed under the planner; not overwriting", "job", a.Job, "error", err)
	case errors.Is(err, submit.ErrForbidden):
		a.Status, a.Error = StatusRefused, err.Error()
		m.metrics.WriteErrors++
		m.memFor(a.key).refusedUntil = r.Time.Add(max(s.Cooldown, s.Interval))
		m.logForbiddenLocked(a, err)
	case errors.Is(err, submit.ErrRejected):
		a.Status, a.Error = StatusRefused, err.Error()
		a.verdict = VerdictNomadRefused
		m.metrics.WriteErrors++
		// Retrying at once would be refused again (e.g. an active
		// deployment): wait one cooldown, at least one interval.
		m.memFor(a.key).refusedUntil = r.Time.Add(max(s.Cooldown, s.Interval))
		m.log.Info("nomad refused the update now; deciding again next round", "job", a.Job, "error", err)
	default:
		a.Status, a.Error = StatusFailed, err.Error()
		m.metrics.WriteErrors++
		m.log.Warn("submitting decision failed; will decide again next round", "job", a.Job, "error", err)
	}
}

// noteAppliedLocked remembers an applied change in the job's memory. m.mu
// is held.
func (m *Manager) noteAppliedLocked(r *Round, a *Action) {
	mm := m.memFor(a.key)
	mm.lastChange = r.Time
	if a.Resize != nil {
		mm.size.pending, mm.size.pendingAt, mm.size.pendingCause = a.Resize.To, r.Time, a.Resize.Cause
		if a.Resize.oomAt.After(mm.size.oomSeen) {
			mm.size.oomSeen = a.Resize.oomAt
		}
		if a.Resize.oomAlloc != "" {
			if mm.size.oomAnswered == nil {
				mm.size.oomAnswered = map[string]bool{}
			}
			mm.size.oomAnswered[a.Resize.oomAlloc] = true
		}
	}
	if a.To == 0 {
		mm.waitingSince, mm.lastResume = r.Time, time.Time{}
	} else if a.From == 0 {
		mm.lastResume, mm.waitingSince = r.Time, time.Time{}
	}
	if a.ReclaimedBy != "" {
		m.noteReclaimLocked(r, a)
	}
}

// writeResize applies a change of shares per worker: one registration
// (EnforceIndex) of the version read with the new device count, the
// worker and server counts and placement, then a count-less scaling event
// with the measured numbers, since a registration records none. The
// caravan driver checkpoints each task as Nomad stops it, and the new
// allocations restore from that checkpoint.
func (m *Manager) writeResize(ctx context.Context, a *Action, c submit.Change) error {
	cp, err := c.Version()
	if err != nil {
		return err
	}
	cp, err = submit.SetDeviceCount(cp, a.Group, a.Resize.device, uint64(a.Resize.To))
	if err != nil {
		return fmt.Errorf("%w: %w", submit.ErrRejected, err)
	}
	res, err := m.cfg.Writer.Register(ctx, cp, c.JobModifyIndex, a.Message)
	a.EvalID = res.EvalID
	if err != nil {
		return err
	}
	if _, err := m.cfg.Writer.Scale(ctx, resizeEvent(a, c)); err != nil {
		m.log.Warn("the shares changed but the scaling event was not recorded", "job", a.Job, "error", err)
	}
	return nil
}

// writeNotes records each refused or waiting resize as a count-less
// scaling event naming its reason, once per job, kind and size.
func (m *Manager) writeNotes(ctx context.Context, r *Round) {
	for _, n := range r.notes {
		m.mu.Lock()
		sz := &m.memFor(n.key).size
		done := sz.announced[n.rz.key]
		m.mu.Unlock()
		if done {
			continue
		}
		meta := map[string]any{submit.EventMetaAction: submit.ActionResizeNote, submit.EventMetaPolicy: r.Policy,
			metaCause: n.rz.Cause, metaSharesFrom: n.rz.From, metaSharesTo: n.rz.To}
		for k, v := range n.rz.meta {
			if k != metaSharesTo && k != metaSharesFrom {
				meta[k] = v
			}
		}
		ev := submit.Scale{Namespace: n.key.Namespace, JobID: n.key.ID, Group: n.group, EventOnly: true,
			Message: noteMessage(n.rz), Meta: meta}
		if _, err := m.cfg.Writer.Scale(ctx, ev); err != nil {
			m.log.Warn("recording a resize refusal failed", "job", n.key.String(), "error", err)
			continue
		}
		m.mu.Lock()
		if sz.announced == nil {
			sz.announced = map[string]bool{}
		}
		sz.announced[n.rz.key] = true
		m.mu.Unlock()
	}
}

// logForbiddenLocked reports a write the planner's token may not make: at
// error level the first time per kind of action (an operator must grant the
// capability or turn the feature off), then at debug; the action's status
// (GET /v1/plan) keeps saying it. m.mu must be held.
func (m *Manager) logForbiddenLocked(a *Action, err error) {
	if m.forbidden == nil {
		m.forbidden = map[Kind]bool{}
	}
	if m.forbidden[a.Kind] {
		m.log.Debug("token may not apply this decision", "job", a.Job, "kind", a.Kind, "error", err)
		return
	}
	m.forbidden[a.Kind] = true
	m.log.Error("the planner's Nomad token lacks an ACL capability; decisions of this kind are not applied until it is granted",
		"job", a.Job, "kind", a.Kind, "error", err)
}

// Lease is a Leader that knows until when its leadership is confirmed
// (consul.Elector): no write may run past it.
type Lease interface{ LeaseUntil() time.Time }

func (m *Manager) leads() bool { return m.cfg.Leader == nil || m.cfg.Leader.IsLeader() }

// fenced bounds a write to the leader's lease, when the leader has one.
func (m *Manager) fenced(ctx context.Context) (context.Context, context.CancelFunc) {
	l, ok := m.cfg.Leader.(Lease)
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, l.LeaseUntil().Sub(m.cfg.Clock.Now()))
}

// write submits one action. Worker and parameter-server counts that change
// together (and not to or from zero) go in one registration with
// EnforceIndex, so the job never runs a mismatched pair; otherwise each
// group is scaled (the scaling events record suspensions and resumptions),
// the second write enforcing the index the first one produced.
func (m *Manager) write(ctx context.Context, r *Round, a *Action, job *source.Job) error {
	if job == nil {
		return errors.New("job vanished")
	}
	c := a.change(r.Policy, job)
	// Nomad refuses a count below the worker group's scaling min, so a
	// user-error stop of such a group stops the job instead.
	if a.Kind == KindStop || a.Kind == KindFinish || (a.Kind == KindUserError && job.Spec.NomadMinWorkers > 0) {
		res, err := m.cfg.Writer.Stop(ctx, c.Job, c.JobModifyIndex, a.Reason)
		a.EvalID = res.EvalID
		return err
	}
	if a.Unpack != nil {
		return m.writeUnpack(ctx, a, c)
	}
	if a.Resize != nil {
		return m.writeResize(ctx, a, c)
	}
	if a.registers() {
		cp, err := c.Version()
		if err != nil {
			return err
		}
		res, err := m.cfg.Writer.Register(ctx, cp, c.JobModifyIndex, c.Message)
		a.EvalID = res.EvalID
		if err == nil && a.ReclaimedBy != "" {
			m.recordReclaim(ctx, a, c)
		}
		return err
	}
	index := c.JobModifyIndex
	scaled := a.scaledGroups()
	for _, group := range scaled {
		res, err := m.cfg.Writer.Scale(ctx, c.Scale(group, index))
		if err != nil {
			return err
		}
		a.EvalID, index = res.EvalID, res.JobModifyIndex
		if group == a.Group && a.Kind == KindUserError {
			// Nomad takes no count with an error: the count change above
			// carries the planner's meta, this event shows red in the UI.
			if _, err := m.cfg.Writer.Scale(ctx, c.Event(group, true)); err != nil {
				m.log.Warn("recording the error event failed (the job is stopped)", "job", a.Job, "error", err)
			}
		}
	}
	if !c.MovesPlacement() {
		return nil
	}
	// The version the scales produced is the one read plus the new counts
	// (the chained indexes guarantee nothing else changed).
	cp, err := c.Version()
	if err != nil {
		return err
	}
	res, err := m.cfg.Writer.Register(ctx, cp, index, c.Message+" (placement affinity)")
	if errors.Is(err, submit.ErrForbidden) && len(scaled) > 0 {
		// The counts are applied; only the affinity is not.
		a.Error = "scaled; placement affinity not registered: " + err.Error()
		m.mu.Lock()
		m.logForbiddenLocked(a, err)
		m.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	a.EvalID = res.EvalID
	return nil
}

// recordReclaim makes a reclaim applied through a registration visible in
// Nomad: a registration leaves no scaling event, so a count-less one (a
// scale-job write that changes nothing) names the queue that asked, in its
// message and meta. Putting the queue in the job's meta instead would
// change every task's meta, which Nomad treats as a destructive update:
// every running allocation of the job would restart.
func (m *Manager) recordReclaim(ctx context.Context, a *Action, c submit.Change) {
	if _, err := m.cfg.Writer.Scale(ctx, c.Event(a.Group, false)); err != nil {
		m.log.Warn("recording the reclaim event failed (the job is changed)", "job", a.Job, "reclaimed_by", a.ReclaimedBy, "error", err)
	}
}

// keptReclaims is how many applied reclaims the planner page lists.
const keptReclaims = 20

// Reclaim is one reclaim the planner applied: a borrower suspended or
// shrunk so that another queue gets its GPUs back.
type Reclaim struct {
	Time time.Time `json:"time"`
	Job  string    `json:"job"`
	Kind Kind      `json:"kind"`
	From int       `json:"from"`
	To   int       `json:"to"`
	// PSFrom and PSTo: the parameter servers, when they changed too.
	PSFrom int `json:"ps_from,omitempty"`
	PSTo   int `json:"ps_to,omitempty"`
	// Queue is the queue (or queues) that asked for the GPUs.
	Queue string `json:"queue"`
	// Via says how Nomad records it: "scale" (the count changes'
	// scaling events) or "registration" (a new job version, recorded by
	// a count-less scaling event).
	Via string `json:"via"`
}

// noteReclaimLocked keeps an applied reclaim for the planner page. m.mu
// must be held.
func (m *Manager) noteReclaimLocked(r *Round, a *Action) {
	via := "scale"
	if a.registers() {
		via = "registration"
	}
	rc := Reclaim{Time: r.Time, Job: a.Job, Kind: a.Kind, From: a.From, To: a.To, Queue: a.ReclaimedBy, Via: via}
	if a.PSGroup != "" {
		rc.PSFrom, rc.PSTo = a.PSFrom, a.PSTo
	}
	m.reclaims = append(m.reclaims, rc)
	if n := len(m.reclaims); n > keptReclaims {
		m.reclaims = slices.Clone(m.reclaims[n-keptReclaims:])
	}
}
