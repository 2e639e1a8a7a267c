// Package manager is the planner's decision loop: every interval (and when
// Nomad changes) it reads the source's snapshot and the progress store,
// refits each managed job's models, asks planner/policy for a plan, turns
// the plan into rate-limited, restart-cost-aware actions (including Gandiva
// time-slicing: suspend by scaling to 0, resume later), and, when it leads
// and is not in dry-run, submits them.
package manager

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/planner/model"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/service/clock"
	"github.com/caravan-nomad/caravan/planner/service/failures"
	"github.com/caravan-nomad/caravan/planner/service/progress"
	"github.com/caravan-nomad/caravan/planner/service/source"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

// Snapshotter is the source as the manager uses it.
type Snapshotter interface {
	Snapshot() source.Snapshot
	Changes() <-chan struct{}
	ScaleStatus(ctx context.Context, key source.JobKey) (*nomadapi.JobScaleStatusResponse, error)
}

// Writer submits decisions (submit.Writer).
type Writer interface {
	Scale(ctx context.Context, s submit.Scale) (submit.Result, error)
	Register(ctx context.Context, job *nomadapi.Job, modifyIndex uint64, reason string) (submit.Result, error)
	Stop(ctx context.Context, job *nomadapi.Job, modifyIndex uint64, reason string) (submit.Result, error)
}

// Leader says whether this instance may write.
type Leader interface{ IsLeader() bool }

// Settings are the tunables of the loop (from config.Policy and Capacity).
type Settings struct {
	Policy             string
	Interval           time.Duration
	Cooldown           time.Duration
	RestartCost        time.Duration
	MaxChangesPerRound int
	MinGain            float64
	SuspendQuantum     time.Duration
	DryRun             bool
	Device             string
	SharesPerGPU       int
	GPUsPerNode        int
}

// Config wires a Manager.
type Config struct {
	Settings Settings
	Source   Snapshotter
	Progress *progress.Store
	Writer   Writer
	Leader   Leader
	Clock    clock.Clock
	Logger   hclog.Logger
}

// Manager runs rounds.
type Manager struct {
	cfg Config
	log hclog.Logger

	mu       sync.Mutex
	settings Settings
	pol      policy.Policy
	mem      map[source.JobKey]*memory
	priors   priors
	last     *Round
	metrics  Metrics
	kick     chan struct{}
}

// Metrics are cumulative counters for /v1/metrics.
type Metrics struct {
	Rounds          uint64
	RoundErrors     uint64
	Applied         map[Kind]uint64
	Conflicts       uint64
	WriteErrors     uint64
	Deferred        uint64
	LastRoundMillis float64
}

// New returns a Manager; it fails for an unknown policy name.
func New(cfg Config) (*Manager, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	p, err := policy.New(cfg.Settings.Policy)
	if err != nil {
		return nil, fmt.Errorf("planner policy: %w", err)
	}
	return &Manager{
		cfg:      cfg,
		log:      cfg.Logger.Named("manager"),
		settings: cfg.Settings,
		pol:      p,
		mem:      map[source.JobKey]*memory{},
		priors:   priors{},
		metrics:  Metrics{Applied: map[Kind]uint64{}},
		kick:     make(chan struct{}, 1),
	}, nil
}

// Reload swaps the settings (SIGHUP). A new policy name starts a fresh policy.
func (m *Manager) Reload(s Settings) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.Policy != m.settings.Policy {
		p, err := policy.New(s.Policy)
		if err != nil {
			return fmt.Errorf("planner policy: %w", err)
		}
		m.pol = p
	}
	m.settings = s
	m.log.Info("settings reloaded", "policy", s.Policy, "interval", s.Interval, "dry_run", s.DryRun)
	m.Kick()
	return nil
}

// Kick asks for a round now (e.g. after a progress report or leadership change).
func (m *Manager) Kick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Last returns the most recent round (nil before the first).
func (m *Manager) Last() *Round {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// MetricsSnapshot returns a copy of the counters.
func (m *Manager) MetricsSnapshot() Metrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	cp := m.metrics
	cp.Applied = make(map[Kind]uint64, len(m.metrics.Applied))
	for k, v := range m.metrics.Applied {
		cp.Applied[k] = v
	}
	return cp
}

// debounce is the least time between two rounds triggered by changes in
// Nomad (allocations change often; decisions need not follow every one).
const debounce = 2 * time.Second

// Run runs rounds every interval, when kicked, and (debounced) when Nomad
// changes, until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	var changed <-chan time.Time
	for {
		m.mu.Lock()
		interval := m.settings.Interval
		m.mu.Unlock()
		if _, err := m.RunRound(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("round failed", "error", err)
		}
		changed = nil
		next := m.cfg.Clock.After(interval)
	wait:
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-next:
		case <-m.kick:
		case <-changed:
		case <-m.cfg.Source.Changes():
			if changed == nil {
				changed = m.cfg.Clock.After(min(debounce, interval))
			}
			goto wait
		}
	}
}

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
	Plan      *policy.JobPlan `json:"plan,omitempty"`
	Index     uint64          `json:"job_modify_index"`
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
	Skipped  string         `json:"skipped,omitempty"` // why no decision was made
	Error    string         `json:"error,omitempty"`
}

// RunRound makes one decision round and, if leading and not in dry-run,
// applies it.
func (m *Manager) RunRound(ctx context.Context) (*Round, error) {
	start := time.Now()
	m.mu.Lock()
	s := m.settings
	pol := m.pol
	m.mu.Unlock()

	r, err := m.decide(ctx, s, pol)
	if err == nil && r.Skipped == "" {
		m.apply(ctx, s, r)
	}
	if err != nil {
		r.Error = err.Error()
	}
	m.mu.Lock()
	m.last = r
	m.metrics.Rounds++
	if err != nil {
		m.metrics.RoundErrors++
	}
	m.metrics.LastRoundMillis = float64(time.Since(start).Microseconds()) / 1000
	m.mu.Unlock()
	return r, err
}

func (m *Manager) memFor(k source.JobKey) *memory {
	mm := m.mem[k]
	if mm == nil {
		mm = &memory{speed: map[shape]float64{}}
		m.mem[k] = mm
	}
	return mm
}

// refreshEvents reads a job's scaling events when its index moved.
func (m *Manager) refreshEvents(ctx context.Context, j *source.Job, mm *memory) error {
	idx := uint64(0)
	if j.Job.JobModifyIndex != nil {
		idx = *j.Job.JobModifyIndex
	}
	if idx == mm.eventsIndex && mm.eventsIndex != 0 {
		return nil
	}
	st, err := m.cfg.Source.ScaleStatus(ctx, j.Key)
	if err != nil {
		return err
	}
	mm.eventsIndex = idx
	mm.lastEvent, mm.lastOurs = nil, nil
	tg, ok := st.TaskGroups[j.Spec.WorkerGroup]
	if !ok {
		return nil
	}
	for i := range tg.Events {
		ev := &tg.Events[i]
		if ev.Count == nil {
			continue // non-count events (e.g. autoscaler errors)
		}
		if mm.lastEvent == nil || ev.Time > mm.lastEvent.Time {
			mm.lastEvent = ev
		}
		if eventAction(ev) != "" && (mm.lastOurs == nil || ev.Time > mm.lastOurs.Time) {
			mm.lastOurs = ev
		}
	}
	// After a leader change, the events say when the planner last acted.
	if t := eventTime(mm.lastOurs); t.After(mm.lastChange) {
		mm.lastChange = t
	}
	return nil
}

// classify decides a job's state from Nomad's view and the events.
func classify(j *source.Job, mm *memory, rep failures.Report) (State, string) {
	if j.SpecErr != nil {
		return StateInvalid, j.SpecErr.Error()
	}
	if j.Stopped() {
		return StateStopped, "job is stopped"
	}
	count := j.Count(j.Spec.WorkerGroup)
	if count > 0 {
		return StateRunning, ""
	}
	last := mm.lastEvent
	switch eventAction(last) {
	case submit.ActionUserError:
		return StateHeld, last.Message
	case submit.ActionSuspend:
		return StateSuspended, last.Message
	case submit.ActionConverged:
		return StateStopped, last.Message
	case "":
		if last != nil {
			return StatePaused, "scaled to 0 by someone else: " + last.Message
		}
		if j.Job.Version != nil && *j.Job.Version == 0 {
			return StateQueued, "submitted with 0 workers"
		}
		return StatePaused, "0 workers set by the job's author"
	}
	// Our last event put it at >0 yet it is at 0: someone else did that.
	return StatePaused, "scaled to 0 outside the planner"
}

func runningAllocs(j *source.Job, group string) (n int, nodes map[string]int) {
	nodes = map[string]int{}
	for _, a := range j.Allocs {
		if a.TaskGroup == group && a.ClientStatus == "running" && a.DesiredStatus == "run" {
			n++
			nodes[a.NodeID]++
		}
	}
	return n, nodes
}

// decide builds the round without side effects on Nomad.
func (m *Manager) decide(ctx context.Context, s Settings, pol policy.Policy) (*Round, error) {
	now := m.cfg.Clock.Now()
	leader := m.cfg.Leader == nil || m.cfg.Leader.IsLeader()
	r := &Round{Time: now, Leader: leader, DryRun: s.DryRun, Policy: pol.Name(), Jobs: []JobView{}, Actions: []Action{}}
	snap := m.cfg.Source.Snapshot()
	if !snap.Synced {
		r.Skipped = "waiting for the first read of Nomad"
		if snap.Err != nil {
			r.Skipped += ": " + snap.Err.Error()
		}
		return r, nil
	}
	r.Capacity = m.cluster(snap, s)

	keys := make([]source.JobKey, 0, len(snap.Jobs))
	for k := range snap.Jobs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a].String() < keys[b].String() })

	m.mu.Lock()
	defer m.mu.Unlock()
	keep := map[progress.JobKey]bool{}
	var in policy.Input
	in.Now, in.Cluster = now, r.Capacity
	type cand struct {
		job  *source.Job
		mm   *memory
		view *JobView
		pj   policy.Job
	}
	var cands []cand
	var actions []Action
	var errs []error
	for _, k := range keys {
		j := snap.Jobs[k]
		keep[progress.JobKey(k)] = true
		mm := m.memFor(k)
		if j.SpecErr == nil {
			if err := m.refreshEvents(ctx, j, mm); err != nil {
				errs = append(errs, err)
				continue // without its events the job's state is unknown: leave it
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
			continue
		}
		v.Workers = j.Count(j.Spec.WorkerGroup)
		if j.Spec.PSGroup != "" {
			v.PS = j.Count(j.Spec.PSGroup)
		}
		running, nodes := runningAllocs(j, j.Spec.WorkerGroup)
		v.Running = running
		m.observe(now, k, j, mm, &v, running, len(nodes), s)

		switch {
		case state == StateRunning && rep.User > j.Spec.MaxUserFails:
			last, _ := rep.Last(failures.User)
			actions = append(actions, Action{Job: k.String(), key: k, job: j, Kind: KindUserError, Group: j.Spec.WorkerGroup,
				From: v.Workers, To: 0, jobModifyIndex: v.Index,
				Reason: fmt.Sprintf("%d user-error failures (limit %d), last: %s", rep.User, j.Spec.MaxUserFails, last.Reason)})
			r.Jobs = append(r.Jobs, v)
			continue
		case state == StateRunning && j.Spec.StopOnConverge && (v.Fit.Converged || v.Fit.Finished):
			why := "converged"
			if v.Fit.Finished {
				why = "finished"
			}
			actions = append(actions, Action{Job: k.String(), key: k, job: j, Kind: KindStop, From: v.Workers, To: 0, jobModifyIndex: v.Index,
				Reason: fmt.Sprintf("%s at step %d, loss %.4g; stopping (the driver checkpoints on stop)", why, v.Fit.Step, v.Fit.Loss)})
			r.Jobs = append(r.Jobs, v)
			continue
		case state != StateRunning && state != StateSuspended && state != StateQueued:
			r.Jobs = append(r.Jobs, v)
			continue
		}
		pj := m.policyJob(now, j, mm, &v, nodes, snap, s)
		if state != StateRunning && now.Sub(mm.lastChange) < s.Cooldown && !mm.lastChange.IsZero() {
			v.Detail = "cooling down after the last change"
			r.Jobs = append(r.Jobs, v)
			continue
		}
		cands = append(cands, cand{job: j, mm: mm, view: &v, pj: pj})
		r.Jobs = append(r.Jobs, v)
	}
	m.cfg.Progress.Forget(keep)
	for k := range m.mem {
		if _, ok := snap.Jobs[k]; !ok {
			delete(m.mem, k)
		}
	}

	// Ask the policy, pinning jobs whose growth would not repay its
	// restart, until the plan is stable (at most three passes).
	pinned := map[string]string{}
	for _, c := range cands {
		if c.pj.Current.Workers > 0 && !c.mm.lastChange.IsZero() && now.Sub(c.mm.lastChange) < s.Cooldown {
			pinned[c.pj.ID] = fmt.Sprintf("in its %s cooldown after the last change", s.Cooldown)
		}
	}
	var plan policy.Plan
	for pass := 0; pass < 3; pass++ {
		in.Jobs = in.Jobs[:0]
		for _, c := range cands {
			pj := c.pj
			if pinned[pj.ID] != "" {
				pj.Min, pj.Max, pj.Gang = pj.Current.Workers, pj.Current.Workers, true
			}
			in.Jobs = append(in.Jobs, pj)
		}
		var err error
		plan, err = pol.Allocate(in)
		if err != nil {
			return r, errors.Join(append(errs, fmt.Errorf("policy %s: %w", pol.Name(), err))...)
		}
		again := false
		for i, jp := range plan.Jobs {
			c := cands[i]
			from := c.pj.Current.Workers
			if jp.Workers > from && from > 0 && pinned[jp.ID] == "" {
				saving := c.view.Predicted[from] - c.view.Predicted[jp.Workers]
				if _, ok := c.view.Predicted[from]; ok && saving < s.RestartCost.Seconds()+s.MinGain {
					pinned[jp.ID] = fmt.Sprintf("the predicted saving (%.0f s) does not repay a %s restart", saving, s.RestartCost)
					again = true
				}
			}
		}
		if !again {
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
	r.Plan = &plan
	for i, jp := range plan.Jobs {
		c := cands[i]
		jp := jp
		c.view.Plan = &jp
		from := c.pj.Current.Workers
		to := jp.Workers
		if why := pinned[jp.ID]; why != "" {
			c.view.Plan.Reason += fmt.Sprintf("; kept at %d: %s", from, why)
		}
		psChange := c.job.Spec.PSGroup != "" && jp.PS != c.pj.Current.PS
		if to == from && !psChange {
			continue
		}
		a := Action{Job: c.job.Key.String(), key: c.job.Key, job: c.job, Group: c.job.Spec.WorkerGroup, From: from, To: to,
			Gain: jp.Gain, Reason: jp.Reason, jobModifyIndex: c.view.Index}
		if psChange {
			a.PSGroup, a.PSFrom, a.PSTo = c.job.Spec.PSGroup, c.pj.Current.PS, jp.PS
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
		actions = append(actions, a)
	}
	// Views were copied into r.Jobs before the plan: refresh them.
	for i := range r.Jobs {
		for _, c := range cands {
			if r.Jobs[i].Namespace == c.view.Namespace && r.Jobs[i].ID == c.view.ID {
				r.Jobs[i] = *c.view
			}
		}
	}
	if actions == nil {
		actions = []Action{}
	}
	order(actions)
	for i := range actions {
		actions[i].Message = scaleMessage(actions[i])
	}
	r.Actions = actions
	return r, errors.Join(errs...)
}

// observe refits a job's models from its progress and records its speed.
func (m *Manager) observe(now time.Time, k source.JobKey, j *source.Job, mm *memory, v *JobView, running, nodes int, s Settings) {
	pk := progress.JobKey(k)
	recs := m.cfg.Progress.Records(pk)
	f := Fit{RemainingSteps: -1, RemainingSource: string(model.SourceNone)}
	if n := len(recs); n > 0 {
		last := recs[n-1]
		f.Step, f.Loss, f.LastReport = last.Step, last.Loss, last.Time
		for _, r := range recs {
			if r.Step >= f.Step {
				f.Step, f.Loss = r.Step, r.Loss
			}
			if r.BatchSize > 0 {
				f.Batch = float64(r.BatchSize)
			}
			if r.Done {
				f.Finished = true
			}
		}
	}
	if n := len(recs); n > 0 && (n != mm.fitN || !recs[n-1].Time.Equal(mm.fitAt)) {
		_, mm.fit, mm.fitErr = fitLoss(recs)
		mm.fitN, mm.fitAt = n, recs[n-1].Time
	}
	conv, err := mm.fit, mm.fitErr
	if len(recs) == 0 {
		conv, err = nil, nil
	}
	if err != nil {
		f.ConvergenceErr = err.Error()
	}
	f.Convergence = conv
	var prior *model.Convergence
	if p, ok := m.priors[j.Spec.Kind]; ok && j.Spec.Kind != "" {
		prior = &p
	}
	rem, src := remaining(j.Spec, float64(f.Step), conv, prior)
	f.RemainingSource = string(src)
	if !math.IsInf(rem, 1) {
		f.RemainingSteps = rem
	}
	if conv != nil && src == model.SourceFit {
		f.Converged = rem <= 0 || (j.Spec.TargetLoss > 0 && f.Loss <= j.Spec.TargetLoss)
		if f.Converged && j.Spec.Kind != "" {
			m.priors[j.Spec.Kind] = *conv
		}
	} else if j.Spec.TargetLoss > 0 && len(recs) > 0 && f.Loss <= j.Spec.TargetLoss {
		f.Converged = true
	}

	// Speed: measure only while the shape has been stable, with reports
	// received after it became stable.
	sh := shape{workers: running, ps: 0, nodes: max(nodes, 1)}
	if j.Spec.PSGroup != "" {
		sh.ps = j.Count(j.Spec.PSGroup)
	}
	if sh != mm.stableShape {
		mm.stableShape, mm.stableSince = sh, now
	}
	since := mm.stableSince
	if w := now.Add(-5 * s.Interval); w.After(since) {
		since = w
	}
	steps, samples, _, ok := m.cfg.Progress.Rate(pk, since)
	f.StepsPerSec, f.SamplesPerSec = steps, samples
	if ok && running > 0 && sh.workers == v.Workers {
		mm.speed[sh] = steps
	}
	form := model.SpeedForm(j.Spec.SpeedModel)
	_, sp, samplesUsed, err := speedModel(form, mm.speed, f.Batch)
	f.Speed, f.SpeedSamples = sp, samplesUsed
	if err != nil {
		f.SpeedErr = err.Error()
	}
	v.Fit = f
}

// policyJob converts a managed job to the policy's view.
func (m *Manager) policyJob(now time.Time, j *source.Job, mm *memory, v *JobView, nodes map[string]int, snap source.Snapshot, s Settings) policy.Job {
	spec := j.Spec
	gpuMilli := workerGPUMilli(j, snap, s)
	pj := policy.Job{
		ID:          j.Key.String(),
		Kind:        spec.Kind,
		Priority:    spec.Priority,
		Min:         spec.MinWorkers,
		Max:         spec.MaxWorkers,
		Gang:        spec.Gang,
		Worker:      policy.Demand{GPUMilli: gpuMilli},
		RestartCost: s.RestartCost,
		Current:     policy.Allocation{Workers: v.Workers},
	}
	if pj.Min == 0 {
		pj.Min = 1
	}
	if spec.PSGroup != "" {
		pj.MinPS, pj.MaxPS = spec.MinPS, spec.MaxPS
		pj.Current.PS = v.PS
	}
	if j.Job.SubmitTime != nil {
		pj.Age = now.Sub(time.Unix(0, *j.Job.SubmitTime))
	}
	nodeIDs := make([]string, 0, len(nodes))
	for id := range nodes {
		nodeIDs = append(nodeIDs, id)
	}
	sort.Strings(nodeIDs)
	if len(nodeIDs) > 0 && sumCounts(nodes) == v.Workers {
		for _, id := range nodeIDs {
			pj.Current.Placement = append(pj.Current.Placement, policy.NodeAlloc{Node: id, Workers: nodes[id]})
		}
	}

	// Time-slicing (Gandiva): the policy admits in Submitted order, so the
	// queue key decides who runs under overload. A job inside its quantum
	// (or one that may not be suspended) is protected; a job past its
	// quantum queues from the end of its slice; a waiting job from when it
	// started waiting. Suspended jobs thus resume once a runner's slice ends.
	submitted := now
	if j.Job.SubmitTime != nil {
		submitted = time.Unix(0, *j.Job.SubmitTime)
	}
	protected := submitted.AddDate(-100, 0, 0)
	if v.Workers > 0 {
		if mm.lastResume.IsZero() {
			mm.lastResume = maxTime(submitted, eventTime(mm.lastOurs))
		}
		mm.waitingSince = time.Time{}
		end := mm.lastResume.Add(s.SuspendQuantum)
		if now.Before(end) || !spec.Suspendable {
			pj.Submitted = protected
		} else {
			// Re-queued at the start of its current slice, so a job that
			// has run for many slices does not keep its place forever.
			slices := now.Sub(mm.lastResume) / s.SuspendQuantum
			pj.Submitted = mm.lastResume.Add(slices * s.SuspendQuantum)
		}
	} else {
		if mm.waitingSince.IsZero() {
			mm.waitingSince = maxTime(submitted, eventTime(mm.lastOurs))
		}
		mm.lastResume = time.Time{}
		pj.Submitted = mm.waitingSince
	}

	// Speed and remaining work, when known, let the policy predict time.
	sm, _, _, _ := speedModel(model.SpeedForm(spec.SpeedModel), mm.speed, v.Fit.Batch)
	if sm != nil && v.Fit.RemainingSteps >= 0 {
		pj.Speed, pj.Remaining = sm, v.Fit.RemainingSteps
		v.Predicted = map[int]float64{}
		for w := 0; w <= spec.MaxWorkers; w++ {
			r := sm.Rate(policy.Shape{Workers: w, PS: pj.Current.PS, Nodes: 1})
			if r > 0 {
				v.Predicted[w] = pj.Remaining / r
			} else {
				v.Predicted[w] = -1
			}
		}
	}
	return pj
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
