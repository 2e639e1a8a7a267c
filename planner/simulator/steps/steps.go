package steps

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/caravan-nomad/caravan/planner/history"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/queue"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
)

// StepJob is a job of a fixed number of SGD steps whose step time is a
// model of caravan's distributed trainer (trainer/README.md): the global
// batch is cut into micro-shards spread over the workers, each worker
// sleeps ComputePerSample per sample (MODELLED compute), and every step
// pays a fixed exchange overhead. `caravan testbed` replays its live
// workloads through SimulateSteps to measure the simulator's fidelity.
type StepJob struct {
	Name string
	// Submitted is the arrival, seconds from the start.
	Submitted float64
	Steps     int
	// Requested is the worker count the job is submitted with (and keeps
	// without a planner).
	Requested int
	// Batch and MicroShards are the trainer's (64 and 8 by default).
	Batch, MicroShards int
	ComputePerSample   float64 // seconds
	// Namespace is the job's Nomad namespace and Priority its Nomad job
	// priority (0: Nomad's default 50), read with StepConfig.Queues.
	Namespace string
	Priority  int
}

// StepTime is the modelled seconds per step with w workers (0 for none):
// the slowest worker's micro-shards times their compute, plus overhead.
func (j StepJob) StepTime(w int, overhead float64) float64 {
	if w <= 0 {
		return 0
	}
	shards := max(j.MicroShards, 1)
	per := int(math.Ceil(float64(shards) / float64(min(w, shards))))
	return float64(per)*float64(j.Batch)/float64(shards)*j.ComputePerSample + overhead
}

// NoPlanner is the policy name SimulateSteps takes for "no planner": every
// job keeps its requested workers and the simulated Nomad queues them.
const NoPlanner = ""

// StepConfig is the testbed cluster and the live loop's timings.
type StepConfig struct {
	Nodes, GPUsPerNode int
	// WorkerMilliGPU is one worker's GPU demand (1000 = a whole GPU).
	WorkerMilliGPU int
	// MaxWorkers caps a job's workers (the jobspec's caravan_max_workers).
	MaxWorkers int
	// Interval is the planner's decision interval; Cooldown the least time
	// between two changes of one job (seconds).
	Interval, Cooldown float64
	// StepOverhead is the per-step exchange cost (seconds).
	StepOverhead float64
	// StartDelay is the time from a job's first placement to its first
	// step; ResizeDelay what a new worker takes to join; ResumeDelay what
	// a job suspended to zero workers takes to restore and restart.
	StartDelay, ResizeDelay, ResumeDelay float64
	// RestartCost is what the policy is told a start or resume costs
	// (seconds); ResizeCost what a job declares a change of its running
	// workers costs (0: RestartCost). The live planner keeps a running
	// job's workers when growing them would save less than its resize cost.
	RestartCost, ResizeCost float64
	// ReportSteps is the steps between two progress reports of a job (the
	// trainer's -log-every). The live planner measures a shape's speed from
	// two reports received after the round that first saw the shape steady,
	// so a shape counts as measured at the first round at least 1.5 report
	// intervals after that one (the mean wait for a second report); 0: at
	// the round after it.
	ReportSteps int
	// SuspendQuantum protects a job that runs from suspension for this
	// long after it (re)started, as the live planner's time-slicing does
	// (seconds; 0: no protection).
	SuspendQuantum float64
	// Tick is the simulation step (seconds); default 1.
	Tick float64
	// Queues, when it names any queue, puts every round through the team
	// queues as the live planner does (queue.SetRanks, queue.Decide,
	// queue.Allocate); without, rounds are as before queues.
	Queues queue.Config
}

// stepState is one job: desired is its worker group's count (the request,
// then the planner's decisions), workers what the simulated Nomad placed.
type stepState struct {
	spec       StepJob
	arrived    bool
	desired    int
	workers    int
	done       float64 // steps
	readyAt    float64 // no progress before this time
	lastChange float64 // the planner's last change of desired
	started    bool
	completion float64
	restarts   int
	gpuSeconds float64
	// Until joinAt the job runs with before workers (new ones starting).
	joinAt float64
	before int
	// measured are the worker counts whose speed the planner has
	// measured; running is the worker count the job steps with, since
	// shapeSince, first seen steady by a round at noticed.
	measured            map[int]bool
	running             int
	shapeSince, noticed float64
	// lastResume is when it last got workers; waitingSince when it last
	// lost them (or arrived).
	lastResume, waitingSince float64
}

// SimulateSteps replays step jobs on a small cluster: a simulated Nomad
// places each job's desired workers as GPUs free up (arrival order, one
// worker at a time, at once), and, unless policyName is NoPlanner, the
// planner changes the desired counts every cfg.Interval seconds as the
// live planner does. The policy sees a job's speed once it has run (one
// observed shape: linear scaling from it, as the live planner's cold start;
// two or more: the step model) and its remaining steps (declared).
func SimulateSteps(cfg StepConfig, policyName string, jobs []StepJob) (engine.Result, error) {
	var pol policy.Policy
	if policyName != NoPlanner {
		var err error
		if pol, err = policy.New(policyName); err != nil {
			return engine.Result{}, err
		}
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 1
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10
	}
	cluster := policy.Cluster{Nodes: make([]policy.Node, cfg.Nodes)}
	for n := range cluster.Nodes {
		cluster.Nodes[n] = policy.Node{ID: fmt.Sprintf("node-%02d", n), GPUs: cfg.GPUsPerNode}
	}
	st := make([]*stepState, len(jobs))
	for i, j := range jobs {
		st[i] = &stepState{spec: j, completion: -1, lastChange: math.Inf(-1), noticed: math.Inf(-1), waitingSince: j.Submitted}
	}
	sort.SliceStable(st, func(a, b int) bool { return st[a].spec.Submitted < st[b].spec.Submitted })
	res := engine.Result{Policy: policyName}
	nextRound := 0.0
	for now := 0.0; ; now += cfg.Tick {
		if now > 30*24*3600 {
			return res, fmt.Errorf("%w: step replay under %s did not finish", engine.ErrStuck, policyName)
		}
		for _, s := range st {
			if !s.arrived && s.spec.Submitted <= now {
				s.arrived, s.desired = true, max(s.spec.Requested, 1)
			}
		}
		if pol != nil && now >= nextRound {
			if err := stepRound(cfg, pol, cluster, st, now); err != nil {
				return res, err
			}
			res.Rounds++
			nextRound = now + cfg.Interval
		}
		place(cfg, st, now)
		left := 0
		for _, s := range st {
			s.advance(now, cfg)
			if s.completion < 0 {
				left++
			}
		}
		if left == 0 {
			break
		}
	}
	byName := map[string]*stepState{}
	for _, s := range st {
		byName[s.spec.Name] = s
	}
	for i, j := range jobs {
		st[i] = byName[j.Name]
	}
	return stepResult(res, st, cfg.Nodes*cfg.GPUsPerNode), nil
}

// place is the simulated Nomad: it stops workers beyond a job's desired
// count, then places missing ones in arrival order while GPUs are free.
func place(cfg StepConfig, st []*stepState, now float64) {
	capacity := cfg.Nodes * cfg.GPUsPerNode * policy.MilliGPU
	used := 0
	for _, s := range st {
		if s.workers > s.desired || s.completion >= 0 {
			s.setWorkers(min(s.workers, s.desired), now, cfg)
		}
		used += s.workers * cfg.WorkerMilliGPU
	}
	for _, s := range st {
		for s.arrived && s.completion < 0 && s.workers < s.desired && used+cfg.WorkerMilliGPU <= capacity {
			s.setWorkers(s.workers+1, now, cfg)
			used += cfg.WorkerMilliGPU
		}
	}
}

// advance moves a job one tick on.
func (s *stepState) advance(now float64, cfg StepConfig) {
	if s.completion >= 0 || s.workers == 0 {
		return
	}
	s.gpuSeconds += float64(s.workers) * cfg.Tick * float64(cfg.WorkerMilliGPU) / policy.MilliGPU
	if now+cfg.Tick <= s.readyAt {
		return
	}
	from := math.Max(now, s.readyAt)
	w := s.workers
	if now < s.joinAt {
		w = s.before
	}
	if w != s.running {
		s.running, s.shapeSince = w, from
	}
	rate := 1 / s.spec.StepTime(w, cfg.StepOverhead)
	need := float64(s.spec.Steps) - s.done
	if dt := now + cfg.Tick - from; rate*dt >= need {
		s.completion = from + need/rate
		s.done = float64(s.spec.Steps)
		s.workers = 0
	} else {
		s.done += rate * dt
	}
}

// stepRound asks the policy for a plan and sets the desired counts. Like
// the live planner (planner/service/manager/round.go) it keeps a job's
// workers in its cooldown, protects a running job inside its suspend
// quantum from suspension (policy.Guarded and policy.HoldPlan, shared with
// the live planner), and re-plans (up to three passes) pinning a running
// job whose growth would save less than a restart.
func stepRound(cfg StepConfig, pol policy.Policy, cluster policy.Cluster, st []*stepState, now float64) error {
	var active []*stepState
	var base []policy.Job
	for _, s := range st {
		if s.completion >= 0 || !s.arrived {
			continue
		}
		active = append(active, s)
		s.observe(now, cfg)
		base = append(base, s.policyJob(cfg, pol.Info(), now))
	}
	if len(active) == 0 {
		return nil
	}
	pinned := map[int]bool{}
	for i, s := range active {
		pinned[i] = s.desired > 0 && now-s.lastChange < cfg.Cooldown
	}
	at := engine.Epoch.Add(time.Duration(now * float64(time.Second)))
	qr, err := stepQueues(cfg, pol, policy.Input{Now: at, Cluster: cluster, Jobs: base}, active, now)
	if err != nil {
		return err
	}
	if qr != nil {
		for i := range active {
			if _, _, held := queue.Demand(&base[i]); !qr.Jobs[i].Admit || held > qr.Jobs[i].Cap {
				pinned[i] = false // the queues' verdict overrides a cooldown
			}
		}
	}
	var plan policy.Plan
	guards := make([]policy.Guard, len(active))
	for pass := 0; ; pass++ {
		in := policy.Input{Now: at, Cluster: cluster}
		for i, s := range active {
			guards[i] = policy.Free
			switch {
			case qr != nil && !qr.Jobs[i].Admit: // reclaimed or waiting: the queues decided
			case pinned[i]:
				guards[i] = policy.Keep
			case s.workers > 0 && now < s.lastResume+cfg.SuspendQuantum:
				guards[i] = policy.NoSuspend
			}
		}
		in.Jobs = policy.Guarded(base, guards)
		var err error
		if qr != nil {
			plan, err = queue.Allocate(pol, in, *qr)
		} else {
			plan, err = pol.Allocate(in)
		}
		if err != nil {
			return err
		}
		policy.HoldPlan(&plan, base, guards)
		if pass == 3 || !pinGrowth(base, plan, pinned) {
			break
		}
	}
	for i, s := range active {
		if w := plan.Jobs[i].Workers; w != s.desired {
			s.desired, s.lastChange = w, now
		}
	}
	return nil
}

// stepQueues is the team queues' verdict on a round's jobs (in.Jobs, of
// active), as the live planner asks for it (nil without queues).
func stepQueues(cfg StepConfig, pol policy.Policy, in policy.Input, active []*stepState, now float64) (*queue.Round, error) {
	if !cfg.Queues.Enabled() {
		return nil, nil
	}
	qjobs := make([]queue.Job, len(active))
	for i, s := range active {
		ns := s.spec.Namespace
		if ns == "" {
			ns = "default"
		}
		qjobs[i] = engine.QueueView(&in.Jobs[i], ns, now, s.lastResume)
		qjobs[i].Priority = s.spec.Priority
		if qjobs[i].Priority == 0 {
			qjobs[i].Priority = 50
		}
	}
	queue.SetRanks(pol, in, qjobs)
	r, err := queue.Decide(cfg.Queues, queue.Capacity(in.Cluster), qjobs)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// pinGrowth pins the running jobs whose planned growth saves less than
// their resize cost, and reports whether it pinned any.
func pinGrowth(jobs []policy.Job, plan policy.Plan, pinned map[int]bool) bool {
	any := false
	for i, jp := range plan.Jobs {
		pj := jobs[i]
		cur := pj.Current.Workers
		if pinned[i] || cur <= 0 || jp.Workers <= cur || pj.Speed == nil {
			continue
		}
		r0, r1 := pj.Speed.Rate(policy.Shape{Workers: cur, Nodes: 1}), pj.Speed.Rate(policy.Shape{Workers: jp.Workers, Nodes: 1})
		if r0 > 0 && r1 > 0 && pj.Remaining/r0-pj.Remaining/r1 < pj.ResizeCostSeconds() {
			pinned[i], any = true, true
		}
	}
	return any
}

// policyJob is the job as the live planner describes it: its current
// allocation is its desired count, placed when every worker runs.
func (s *stepState) policyJob(cfg StepConfig, info policy.Info, now float64) policy.Job {
	pj := s.record(cfg, now).PolicyJob(info.Traits, s.request(cfg))
	if s.workers > 0 && s.workers == s.desired {
		pj.Current.Placement = []policy.NodeAlloc{{Node: "node-00", Workers: s.workers}}
	}
	if len(s.measured) > 0 {
		pj.Speed, pj.Remaining = s.speed(cfg.StepOverhead), float64(s.spec.Steps)-s.done
	}
	pj.Submitted = s.queueKey(cfg, now)
	measured := 0
	for w := range s.measured {
		measured = max(measured, w)
	}
	if history.Explores(info.Traits) {
		pj.Max = policy.ExploreMax(pj, measured)
	}
	return pj
}

// record is the job's history as the live planner reads it
// (history.Live.Record): submitted at its arrival, restarted s.restarts
// times, its current allocation its desired count. It carries no attained
// service: the step engine has handed the policy none since it began, and
// giving it the GPU-seconds held would move the testbed's figures.
func (s *stepState) record(cfg StepConfig, now float64) history.Record {
	return history.Record{ID: s.spec.Name, Kind: s.spec.Name, Submitted: engine.At(s.spec.Submitted), Now: engine.At(now),
		Restarts: s.restarts, Current: policy.Allocation{Workers: s.desired}, RestartCost: engine.Seconds(cfg.RestartCost)}
}

// request is what the job asks of the policy, as a live job's meta says
// it (source.Spec.Request): its requested workers, up to cfg.MaxWorkers.
func (s *stepState) request(cfg StepConfig) history.Request {
	return history.Request{
		Requested: s.spec.Requested, Min: 1, Max: max(cfg.MaxWorkers, 1),
		Worker:     policy.Demand{GPUMilli: cfg.WorkerMilliGPU},
		ResizeCost: time.Duration(cfg.ResizeCost * float64(time.Second)),
	}
}

// observe is the live planner measuring the job's speed at a round: a
// steady shape (every desired worker stepping) is noticed by the first
// round that sees it and measured once a second report has come since.
func (s *stepState) observe(now float64, cfg StepConfig) {
	if s.running == 0 || s.workers != s.desired || now < s.joinAt || now < s.readyAt {
		return
	}
	if s.noticed < s.shapeSince {
		s.noticed = now
		return
	}
	gap := float64(cfg.ReportSteps) * s.spec.StepTime(s.running, cfg.StepOverhead)
	if now-s.noticed >= 1.5*gap {
		if s.measured == nil {
			s.measured = map[int]bool{}
		}
		s.measured[s.running] = true
	}
}

// speed is what the live planner knows of the job's speed: with one
// observed worker count, linear scaling from it (its cold start); with two
// or more, its fitted model, taken here as the true step model.
func (s *stepState) speed(overhead float64) policy.SpeedModel {
	spec := s.spec
	one := 0
	for w := range s.measured {
		one = w
	}
	return policy.SpeedFunc(func(sh policy.Shape) float64 {
		switch {
		case sh.Workers <= 0:
			return 0
		case len(s.measured) == 1:
			return float64(sh.Workers) / float64(one) / spec.StepTime(one, overhead)
		}
		return 1 / spec.StepTime(sh.Workers, overhead)
	})
}

// queueKey is the time the policy admits the job by, as the live
// planner's time-slicing sets it (history.TimeSlice.QueueKey). Every
// protected job gets one key, a century before engine.Epoch, so protected
// jobs tie and the policy orders them by ID (the live planner anchors the
// century at each job's submission; kept so as not to move the testbed's
// fidelity figures).
func (s *stepState) queueKey(cfg StepConfig, now float64) time.Time {
	ts := history.TimeSlice{Running: s.workers > 0, Quantum: engine.Seconds(cfg.SuspendQuantum),
		Resumed: engine.At(s.lastResume), Waiting: engine.At(s.waitingSince)}
	return ts.QueueKey(engine.Epoch, engine.At(now))
}

// setWorkers changes the placed workers, charging the delay the change
// costs.
func (s *stepState) setWorkers(w int, now float64, cfg StepConfig) {
	if w == s.workers {
		return
	}
	switch {
	case s.workers == 0 && !s.started:
		s.readyAt, s.started = now+cfg.StartDelay, true
	case s.workers == 0:
		s.readyAt = now + cfg.ResumeDelay
		s.restarts++
	case w > s.workers:
		// New workers join after starting; the running ones go on.
		s.joinAt, s.before = now+cfg.ResizeDelay, s.workers
	}
	switch {
	case s.workers == 0 && w > 0:
		s.lastResume = now
	case w == 0:
		s.waitingSince = now
	}
	s.workers = w
}

func stepResult(res engine.Result, st []*stepState, gpus int) engine.Result {
	var sum, first, last, gpuSec float64
	first = math.Inf(1)
	for _, s := range st {
		r := engine.JobResult{Name: s.spec.Name, Submitted: s.spec.Submitted, Completed: s.completion,
			JCT: s.completion - s.spec.Submitted, Restarts: s.restarts}
		res.Jobs = append(res.Jobs, r)
		res.Restarts += r.Restarts
		sum += r.JCT
		first = math.Min(first, s.spec.Submitted)
		last = math.Max(last, s.completion)
		gpuSec += s.gpuSeconds
	}
	if len(st) > 0 {
		res.AvgJCT = sum / float64(len(st))
		res.Makespan = last - first
	}
	if res.Makespan > 0 && len(st) > 0 {
		res.GPUUtil = gpuSec / (float64(max(gpus, 1)) * res.Makespan)
	}
	return res
}
