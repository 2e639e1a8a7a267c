package manager

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/queue"
	"github.com/caravan-nomad/caravan/planner/rightsize"
	"github.com/caravan-nomad/caravan/planner/service/failures"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/source"
)

// JobView is one managed job as the API shows it.
type JobView struct {
	Namespace string          `json:"namespace"`
	ID        string          `json:"id"`
	State     State           `json:"state"`
	Detail    string          `json:"detail,omitempty"`
	Group     string          `json:"worker_group,omitempty"`
	Workers   int             `json:"workers"`
	Running   int             `json:"running"`
	PS        int             `json:"ps,omitempty"`
	Spec      source.Spec     `json:"spec"`
	Fit       Fit             `json:"model"`
	Failures  failures.Report `json:"failures"`
	Predicted map[int]float64 `json:"predicted_remaining_seconds,omitempty"` // by worker count; -1 = never
	History   *History        `json:"history,omitempty"`                     // what the policy is told of its past
	Plan      *policy.JobPlan `json:"plan,omitempty"`
	Index     uint64          `json:"job_modify_index"`
	// Queue is the team queues' verdict (absent without queues).
	Queue *queue.Decision `json:"queue,omitempty"`
	// SinceCheckpoint is the progress a suspension would lose now, in
	// seconds (with queues): the time since the job's newest durable state
	// (a checkpoint the caravan driver saved or restored, from its task
	// events), else since the planner last resumed it.
	SinceCheckpoint float64 `json:"since_checkpoint_seconds,omitempty"`
	// Rightsize is the shares per worker the job's measurements support
	// (applied only in the job's or its queue's "apply" mode;
	// planner/POLICY.md "Right-sizing").
	Rightsize *rightsize.Recommendation `json:"rightsize,omitempty"`
	// Resize is the change of shares per worker decided, waiting, refused
	// or pending this round (right-sizing applied, or a regrowth after the
	// job ran out of GPU memory).
	Resize *Resize `json:"resize,omitempty"`
	// Packing is the job's live packing measurements (planner/POLICY.md,
	// "Live packing"), while it holds GPUs.
	Packing *JobPacking `json:"packing,omitempty"`
}

// Round is the outcome of one decision round.
type Round struct {
	Time     time.Time      `json:"time"`
	Leader   bool           `json:"leader"`
	DryRun   bool           `json:"dry_run"`
	Policy   string         `json:"policy"`
	Capacity policy.Cluster `json:"capacity"`
	Jobs     []JobView      `json:"jobs"`
	Plan     *policy.Plan   `json:"plan,omitempty"`
	Actions  []Action       `json:"actions"`
	// Candidates are the jobs the round considered, each with its verdict.
	Candidates []Candidate `json:"candidates"`
	Skipped    string      `json:"skipped,omitempty"` // why no decision was made
	Error      string      `json:"error,omitempty"`
	// Queues is each team queue's standing (absent without queues).
	Queues []queue.QueueState `json:"queues,omitempty"`
	// QueueGuarantees says how the configured guarantees fit the live
	// cluster, and why they are scaled when they do not (absent without
	// queues).
	QueueGuarantees *queue.Guarantees `json:"queue_guarantees,omitempty"`
	// Reclaims are the newest reclaims this planner applied (at most
	// keptReclaims, oldest first, this round's included).
	Reclaims []Reclaim `json:"reclaims,omitempty"`
	// Packing is live packing's view of every GPU (packing.go).
	Packing *PackingView `json:"packing,omitempty"`

	// notes are the refused and waiting resizes whose events apply writes.
	notes []sizeNote
}

// decide builds the round without side effects on Nomad: each job is
// triaged (stops, holds, policy candidates), the policy plans the
// candidates under the guards, and the plan becomes actions.
func (m *Manager) decide(ctx context.Context, s Settings, pol policy.Policy) (*Round, error) {
	now := m.cfg.Clock.Now()
	leader := m.cfg.Leader == nil || m.cfg.Leader.IsLeader()
	r := &Round{Time: now, Leader: leader, DryRun: s.DryRun, Policy: pol.Name(), Jobs: []JobView{}, Actions: []Action{}, Candidates: []Candidate{}}
	snap := m.cfg.Source.Snapshot()
	if !snap.Synced {
		r.Skipped = "waiting for the first read of Nomad"
		if snap.Err != nil {
			r.Skipped += ": " + snap.Err.Error()
		}
		return r, nil
	}
	r.Capacity = m.cluster(snap, s)

	m.mu.Lock()
	defer m.mu.Unlock()
	b := &roundBuilder{m: m, ctx: ctx, s: s, pol: pol, now: now, snap: snap, r: r,
		gpus: gpuShape{perGPU: sharesPerGPU(snap, s), memoryPerShareMiB: memoryPerShareMiB(snap)}}
	keys := make([]source.JobKey, 0, len(snap.Jobs))
	for k := range snap.Jobs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a].String() < keys[b].String() })
	for _, k := range keys {
		b.triage(k, snap.Jobs[k])
	}
	m.forget(snap)
	b.fitGrowth()
	r.notes = b.notes

	plan, pins, err := b.plan()
	if err != nil {
		return r, errors.Join(append(b.errs, err)...)
	}
	b.act(plan, pins)
	b.pack()
	return r, errors.Join(b.errs...)
}

// cand is a job the policy plans.
type cand struct {
	job  *source.Job
	mm   *memory
	view *JobView
	pj   policy.Job
	// quantum: a running job inside its suspend quantum, or one that
	// may not be suspended: the policy may resize it, not suspend it.
	quantum bool
	// resize is the change of its shares per worker decided this round.
	resize *Resize
}

// roundBuilder carries one round's decision through its stages.
type roundBuilder struct {
	m       *Manager
	ctx     context.Context
	s       Settings
	pol     policy.Policy
	now     time.Time
	snap    source.Snapshot
	r       *Round
	cands   []cand
	actions []Action
	errs    []error
	// gaining are the queues that gain GPUs this round (with queues).
	gaining []string
	// gpus is what right-sizing needs of the cluster's GPUs, read once.
	gpus gpuShape
	// notes are the refused and waiting resizes, for their events.
	notes []sizeNote
}

// triage classifies one job and refits its models: it becomes an action
// (a stop), a job held out of the plan, or a policy candidate.
func (b *roundBuilder) triage(k source.JobKey, j *source.Job) {
	m, s, now, r := b.m, b.s, b.now, b.r
	mm := m.memFor(k)
	if j.SpecErr == nil {
		if err := m.refreshEvents(b.ctx, now, j, mm); err != nil {
			b.errs = append(b.errs, err)
			return // without its events the job's state is unknown: leave it
		}
	}
	rep := failures.Classify(j.Allocs)
	state, detail := classify(j, mm, rep)
	v := JobView{Namespace: k.Namespace, ID: k.ID, State: state, Detail: detail, Spec: j.Spec, Failures: rep, Group: j.Spec.WorkerGroup}
	if j.Job.JobModifyIndex != nil {
		v.Index = *j.Job.JobModifyIndex
	}
	if state == StateInvalid {
		r.Jobs = append(r.Jobs, v)
		return
	}
	v.Workers = j.Count(j.Spec.WorkerGroup)
	if j.Spec.PSGroup != "" {
		v.PS = j.Count(j.Spec.PSGroup)
	}
	running, nodes := runningAllocs(j, j.Spec.WorkerGroup)
	v.Running = running
	recs := m.observe(now, k, j, mm, &v, running, len(nodes), s)
	m.rightsize(now, j, mm, &v, running, recs, b.gpus, s)
	rep.MarkGPUOutOfMemory(oomReports(recs))
	var rz *Resize
	if state == StateRunning {
		rz = b.sizing(j, mm, &v, running, recs, &rep)
	}
	v.Failures = rep
	a := stopAction(j, &v, rep)
	if a == nil {
		a = partialGang(now, s, j, mm, &v)
	}
	if a != nil {
		b.actions = append(b.actions, *a)
		r.Jobs = append(r.Jobs, v)
		return
	}
	if state != StateRunning && state != StateSuspended && state != StateQueued {
		r.Jobs = append(r.Jobs, v)
		return
	}
	if stop, ok := finishedJob(now, j, &v); ok {
		if stop != nil {
			b.actions = append(b.actions, *stop)
		}
		r.Jobs = append(r.Jobs, v)
		return
	}
	pj := m.policyJob(now, j, mm, &v, nodes, b.snap, s, b.pol.Info().Traits)
	if state != StateRunning && now.Sub(mm.lastChange) < s.Cooldown && !mm.lastChange.IsZero() {
		v.Detail = "cooling down after the last change"
		r.Candidates = append(r.Candidates, Candidate{Job: k.String(), key: k, From: v.Workers, To: v.Workers,
			Verdict: VerdictCooldown, Detail: fmt.Sprintf("in its %s cooldown after the last change", s.Cooldown)})
		r.Jobs = append(r.Jobs, v)
		return
	}
	b.cands = append(b.cands, cand{job: j, mm: mm, view: &v, pj: pj, quantum: inQuantum(now, j, mm, v.Workers, s), resize: rz})
	r.Jobs = append(r.Jobs, v)
}

// stopAction is the stop a running job has earned: repeated user errors,
// or convergence when the job lets the planner stop it.
func stopAction(j *source.Job, v *JobView, rep failures.Report) *Action {
	if v.State != StateRunning {
		return nil
	}
	k := j.Key
	switch {
	case rep.User > j.Spec.MaxUserFails:
		last, _ := rep.Last(failures.User)
		return &Action{Job: k.String(), key: k, job: j, Kind: KindUserError, Group: j.Spec.WorkerGroup,
			From: v.Workers, To: 0, jobModifyIndex: v.Index,
			Reason: fmt.Sprintf("%d user-error failures (limit %d), last: %s", rep.User, j.Spec.MaxUserFails, last.Reason)}
	case j.Spec.StopOnConverge && (v.Fit.Converged || v.Fit.Finished):
		why := "converged"
		if v.Fit.Finished {
			why = "finished"
		}
		return &Action{Job: k.String(), key: k, job: j, Kind: KindStop, From: v.Workers, To: 0, jobModifyIndex: v.Index,
			Reason: fmt.Sprintf("%s at step %d, loss %.4g; stopping (the driver checkpoints on stop)", why, v.Fit.Step, v.Fit.Loss)}
	}
	return nil
}

// forget drops the progress and memory of jobs Nomad no longer has.
func (m *Manager) forget(snap source.Snapshot) {
	keep := map[ingest.JobKey]bool{}
	for k := range snap.Jobs {
		keep[ingest.JobKey(k)] = true
	}
	m.cfg.Progress.Forget(keep)
	for k := range m.mem {
		if _, ok := snap.Jobs[k]; !ok {
			delete(m.mem, k)
			delete(m.history, k)
		}
	}
}

// pins are the candidates held at their shape, and why.
type pins struct {
	workers map[string]pin    // workers (and servers) kept
	ps      map[string]string // servers only kept
}

// plan asks the policy, pinning jobs in their cooldown and jobs whose
// change would not repay its cost, until the plan is stable (at most four
// passes). Guarded jobs keep their place whatever the policy's ranking.
func (b *roundBuilder) plan() (policy.Plan, pins, error) {
	s, now := b.s, b.now
	p := pins{workers: map[string]pin{}, ps: map[string]string{}}
	for _, c := range b.cands {
		if c.pj.Current.Workers > 0 && !c.mm.lastChange.IsZero() && now.Sub(c.mm.lastChange) < s.Cooldown {
			p.workers[c.pj.ID] = pin{VerdictCooldown, fmt.Sprintf("in its %s cooldown after the last change", s.Cooldown)}
		}
	}
	qr, err := b.queueRound()
	if err != nil {
		return policy.Plan{}, p, err
	}
	if qr != nil {
		for i, c := range b.cands {
			if !qr.Jobs[i].Admit || overCap(&c.pj, qr.Jobs[i]) {
				delete(p.workers, c.pj.ID) // the queues' verdict overrides a cooldown
			}
		}
	}
	in := policy.Input{Now: now, Cluster: b.r.Capacity}
	pjs := make([]policy.Job, len(b.cands))
	for i, c := range b.cands {
		pjs[i] = c.pj
	}
	guards := make([]policy.Guard, len(b.cands))
	var plan policy.Plan
	for pass := 0; ; pass++ {
		in.Jobs = in.Jobs[:0]
		for i, c := range b.cands {
			pj := c.pj
			held := p.workers[pj.ID].why != ""
			guards[i] = guardOf(held, c.quantum)
			if qr != nil && !qr.Jobs[i].Admit {
				guards[i] = policy.Free // reclaimed or waiting: the queues decided
			}
			// A pinned job keeps its servers too: a cooldown that held the
			// workers but let the servers move let a job that had just
			// shrunk go 1 -> 4 servers in the next round.
			if (held || p.ps[pj.ID] != "") && pj.MaxPS > 0 && pj.Current.Workers > 0 {
				ps := min(max(pj.Current.PS, pj.MinPS), pj.MaxPS)
				pj.MinPS, pj.MaxPS = ps, ps
			}
			in.Jobs = append(in.Jobs, pj)
		}
		in.Jobs = policy.Guarded(in.Jobs, guards)
		if qr != nil {
			plan, err = queueAllocate(b.pol, in, qr)
		} else {
			plan, err = b.pol.Allocate(in)
		}
		if err != nil {
			return plan, p, fmt.Errorf("policy %s: %w", b.pol.Name(), err)
		}
		policy.HoldPlan(&plan, pjs, guards)
		if pass == 3 || repays(pjs, plan, s, p.workers, p.ps) {
			break
		}
	}
	// JSON cannot carry +Inf: "never" is -1 in the API.
	for i := range plan.Jobs {
		if math.IsInf(plan.Jobs[i].PredictedRemaining, 0) || math.IsNaN(plan.Jobs[i].PredictedRemaining) {
			plan.Jobs[i].PredictedRemaining = -1
		}
		if math.IsInf(plan.Jobs[i].Gain, 0) || math.IsNaN(plan.Jobs[i].Gain) {
			plan.Jobs[i].Gain = -1
		}
	}
	return plan, p, nil
}

// act turns the plan into candidates' verdicts and actions: stops and
// shrinks first, then growth by gain.
func (b *roundBuilder) act(plan policy.Plan, p pins) {
	r := b.r
	r.Plan = &plan
	for i, jp := range plan.Jobs {
		c := b.cands[i]
		c.view.Plan = &jp
		cd := Candidate{Job: c.job.Key.String(), key: c.job.Key, From: c.pj.Current.Workers, To: jp.Workers,
			PSFrom: c.pj.Current.PS, PSTo: jp.PS, Gain: jp.Gain, Verdict: VerdictUnchanged, Detail: jp.Reason}
		if why := p.ps[jp.ID]; why != "" && p.workers[jp.ID].why == "" {
			c.view.Plan.Reason += "; " + why
			cd.Verdict, cd.Detail = VerdictRestartCost, why
		}
		if pn := p.workers[jp.ID]; pn.why != "" {
			c.view.Plan.Reason += fmt.Sprintf("; kept at %d: %s", cd.From, pn.text)
			cd.Verdict, cd.Detail = pn.why, pn.text
		}
		psChange := c.job.Spec.PSGroup != "" && jp.PS != c.pj.Current.PS
		switch {
		case c.resize != nil && jp.Workers > 0:
			// Shares and workers change in one registration.
			cd.Verdict = ""
			a := b.action(c, jp, psChange)
			if cd.To == cd.From && !psChange {
				a.Kind = KindResize
				a.Reason = c.resize.Reason
			}
			a.Resize = c.resize
			b.actions = append(b.actions, a)
		case cd.To != cd.From || psChange:
			cd.Verdict = "" // settled after apply
			b.actions = append(b.actions, b.action(c, jp, psChange))
		}
		if c.resize != nil && jp.Workers == 0 {
			c.view.Resize.Status = ResizeWaiting
			c.view.Resize.Reason += "; the plan gives the job no workers this round"
		}
		r.Candidates = append(r.Candidates, cd)
	}
	// Views were copied into r.Jobs before the plan: refresh them.
	for i := range r.Jobs {
		for _, c := range b.cands {
			if r.Jobs[i].Namespace == c.view.Namespace && r.Jobs[i].ID == c.view.ID {
				r.Jobs[i] = *c.view
			}
		}
	}
	actions := b.actions
	if actions == nil {
		actions = []Action{}
	}
	order(actions)
	noteRoomFor(actions, b.waiting(plan))
	for i := range actions {
		actions[i].Message = scaleMessage(actions[i])
	}
	r.Actions = actions
}

// waiting names the jobs the plan gives workers that are not running yet
// (submitted with a count, waiting for placement): a shrink in the same
// round makes room for them.
func (b *roundBuilder) waiting(plan policy.Plan) []string {
	var out []string
	for i, jp := range plan.Jobs {
		if c := b.cands[i]; jp.Workers > 0 && c.view.Running < jp.Workers && c.pj.Current.Workers == jp.Workers {
			out = append(out, jobName(c.job.Key.String()))
		}
	}
	return out
}

// action is the change the plan makes to one candidate.
func (b *roundBuilder) action(c cand, jp policy.JobPlan, psChange bool) Action {
	from, to := c.pj.Current.Workers, jp.Workers
	a := Action{Job: c.job.Key.String(), key: c.job.Key, job: c.job, Group: c.job.Spec.WorkerGroup, From: from, To: to,
		Gain: jp.Gain, Reason: jp.Reason, jobModifyIndex: c.view.Index, Unmeasured: c.view.Fit.Speed == nil}
	if psChange {
		a.PSGroup, a.PSFrom, a.PSTo = c.job.Spec.PSGroup, c.pj.Current.PS, jp.PS
	}
	a.ReclaimedBy = b.reclaimedBy(c, from, to)
	if b.s.PlacementAffinity && to > 0 {
		for _, na := range jp.Placement {
			if na.Workers > 0 {
				a.Nodes = append(a.Nodes, na.Node)
			}
		}
	}
	if p, ok := c.view.Predicted[from]; ok {
		if q, ok2 := c.view.Predicted[to]; ok2 && p >= 0 && q >= 0 {
			a.Saving = p - q
		}
	}
	switch {
	case to == 0 && from == 0:
		a.Kind = KindScale // parameter servers only
	case to == 0:
		a.Kind = KindSuspend
	case from == 0 && c.view.State == StateSuspended:
		a.Kind = KindResume
	case from == 0:
		a.Kind = KindStart
	default:
		a.Kind = KindScale
	}
	return a
}

// repays pins, for the next pass, every change of plan that does not repay
// its cost (the job's declared resize cost, else the planner's restart
// cost, plus the least gain), and reports whether the plan stands as it is:
//   - a running job's growth in workers must save a resize (at its
//     current servers);
//   - a running job's change of parameter servers must save a resize by
//     itself (at its planned workers): a server is free in the policy's
//     GPU-only accounting, so any positive gain, however small, moved one;
//   - a plan that only reshapes running jobs (every job that asks for
//     workers runs them all) must save, in total predicted
//     remaining time, a resize per job it changes: Optimus's greedy
//     rebuilds every round from the minimum, and two jobs whose next worker
//     is worth about the same swap it back and forth.
func repays(jobs []policy.Job, plan policy.Plan, s Settings, pinned map[string]pin, pinnedPS map[string]string) bool {
	stands := true
	total, cost, changed, judged := 0.0, 0.0, 0, true
	for i, jp := range plan.Jobs {
		pj := jobs[i]
		cur := pj.Current
		resize := pj.ResizeCostSeconds()
		need := resize + s.MinGain
		if cur.Workers > 0 && len(cur.Placement) == 0 {
			// Asked for but not running (a newcomer waiting for room):
			// the plan may be giving it its first workers.
			judged = false
		}
		if pinned[jp.ID].why != "" || (jp.Workers == cur.Workers && jp.PS == cur.PS) {
			continue
		}
		before, ok1 := remainingTime(pj, cur.Workers, cur.PS)
		mid, ok2 := remainingTime(pj, jp.Workers, cur.PS)
		after, ok3 := remainingTime(pj, jp.Workers, jp.PS)
		if cur.Workers <= 0 || jp.Workers <= 0 || !ok1 || !ok2 || !ok3 {
			judged = false // a start, a suspend, or no model: the policy's call
			continue
		}
		if jp.Workers > cur.Workers && before-mid < need {
			pinned[jp.ID] = pin{VerdictRestartCost, fmt.Sprintf("the predicted saving (%.0f s) does not repay a %s resize", before-mid, secs(resize))}
			stands = false
			continue
		}
		if jp.PS != cur.PS && pinnedPS[jp.ID] == "" && mid-after < need {
			pinnedPS[jp.ID] = fmt.Sprintf("servers kept at %d: %d would save %.0f s, less than a %s resize", cur.PS, jp.PS, mid-after, secs(resize))
			stands = false
			continue
		}
		total += before - after
		cost += need
		changed++
	}
	if stands && judged && changed > 0 && total < cost {
		for i, jp := range plan.Jobs {
			if cur := jobs[i].Current; pinned[jp.ID].why == "" && (jp.Workers != cur.Workers || jp.PS != cur.PS) {
				pinned[jp.ID] = pin{VerdictRestartCost, fmt.Sprintf("the plan's reshaping saves %.0f s in all, less than the %.0f s its %d resizes cost", total, cost, changed)}
			}
		}
		stands = false
	}
	return stands
}

// remainingTime is the job's predicted remaining time with w workers and ps
// servers; ok is false without a speed model or with no predicted progress.
func remainingTime(pj policy.Job, w, ps int) (float64, bool) {
	if pj.Speed == nil || w <= 0 {
		return 0, false
	}
	r := pj.Speed.Rate(policy.Shape{Workers: w, PS: ps, Nodes: 1})
	if r <= 0 || math.IsNaN(r) {
		return 0, false
	}
	return pj.Remaining / r, true
}

// pin is why a job's shape is held for the next pass of the policy.
type pin struct {
	why  Verdict
	text string
}

// guardOf is what the round's gates hold a running job to: its workers
// while it is pinned (its cooldown, or a change that would not repay a
// restart), some workers inside its suspend quantum.
func guardOf(pinned, quantum bool) policy.Guard {
	switch {
	case pinned:
		return policy.Keep
	case quantum:
		return policy.NoSuspend
	}
	return policy.Free
}

// secs renders seconds as a rounded duration ("30s", "2.5s").
func secs(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(100 * time.Millisecond)
}
