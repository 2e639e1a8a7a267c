package philly

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/caravan-nomad/caravan/planner/history"
	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/queue"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/caravan-nomad/caravan/planner/workload"
)

// PhillyReport is the outcome of replaying philly-jobs.csv.
type PhillyReport struct {
	Policy             string
	Jobs               int
	Nodes, GPUsPerNode int
	Rounds             int
	AvgJCT, MedianJCT  float64 // seconds
	P99JCT             float64
	Makespan           float64 // seconds from the first submission to the last completion
	Restarts           int
	Wall               time.Duration // total wall time of the replay (reading included)
	PolicyTime         time.Duration // wall time inside the policy
	PeakRSSBytes       int64         // peak resident memory of the process (0 if unknown)
}

func (r PhillyReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "philly replay: %d jobs under %s on %d nodes x %d GPUs (60 s decisions, event-driven)\n", r.Jobs, r.Policy, r.Nodes, r.GPUsPerNode)
	fmt.Fprintf(&b, "  average JCT %.0f s (%.2f h), median %.0f s, p99 %.0f s, makespan %.1f days, restarts %d, %d rounds\n",
		r.AvgJCT, r.AvgJCT/3600, r.MedianJCT, r.P99JCT, r.Makespan/86400, r.Restarts, r.Rounds)
	fmt.Fprintf(&b, "  wall time %s (policy %s), peak RSS %.0f MiB", r.Wall.Round(time.Millisecond), r.PolicyTime.Round(time.Millisecond), float64(r.PeakRSSBytes)/(1<<20))
	return b.String()
}

// phillyJob is a Philly job: work is its recorded duration at its
// requested GPUs; with fewer GPUs it runs proportionally slower (the trace
// has no speedup measurements, so linear scaling up to the request is the
// assumption; more than the request does not help).
type phillyJob struct {
	id         string
	gpus       int
	submit     float64
	work, done float64 // seconds of work at the requested size
	w          int
	alloc      []policy.NodeAlloc
	rescale    float64
	attained   float64
	restarts   int
	completion float64
	vc         string  // its virtual cluster (the namespace with queues)
	resumed    float64 // when it last got GPUs after holding none
}

func (j *phillyJob) rate(w int) float64 { return float64(min(w, j.gpus)) / float64(j.gpus) }

// advance runs the job for dt seconds starting at now.
func (j *phillyJob) advance(now, dt float64) {
	if j.w == 0 || j.completion >= 0 {
		return
	}
	d := math.Min(j.rescale, dt)
	j.rescale -= d
	j.attained += d * float64(j.w)
	now += d
	dt -= d
	if dt <= 0 {
		return
	}
	r := j.rate(j.w)
	if need := (j.work - j.done) / r; need <= dt {
		j.done = j.work
		j.completion = now + need
		j.attained += need * float64(j.w)
		return
	}
	j.done += r * dt
	j.attained += dt * float64(j.w)
}

// finishIn is the time until the job completes at its current allocation.
func (j *phillyJob) finishIn() float64 {
	if j.w == 0 {
		return math.Inf(1)
	}
	return j.rescale + (j.work-j.done)/j.rate(j.w)
}

// ReplayPhilly replays the Philly job log under a policy. Decisions happen
// on the scheduling interval grid, but only at intervals in which a job
// arrived or finished (nothing else changes a plan), and running jobs are
// advanced analytically between decisions, so a 108-day trace replays in
// seconds to minutes.
func ReplayPhilly(cfg engine.Config, policyName, path string) (PhillyReport, error) {
	start := time.Now()
	cfg = cfg.WithDefaults()
	pol, err := policy.New(policyName)
	if err != nil {
		return PhillyReport{}, err
	}
	info := pol.Info()
	cluster, jobs, err := loadPhillyJobs(cfg, path)
	if err != nil {
		return PhillyReport{}, err
	}
	rep := PhillyReport{Policy: policyName, Jobs: len(jobs), Nodes: cfg.Nodes, GPUsPerNode: cfg.GPUsPerNode}
	iv := cfg.Interval
	grid := func(t float64) float64 { return math.Ceil(t/iv-1e-9) * iv }
	var active []*phillyJob
	next := 0 // next arrival
	now := grid(jobs[0].submit)
	finished := 0
	in := policy.Input{Cluster: cluster}
	var hist residualWork
	var qjobs []queue.Job
	for finished < len(jobs) {
		// Admit arrivals up to now.
		for next < len(jobs) && jobs[next].submit <= now {
			active = append(active, jobs[next])
			next++
		}
		// Decide.
		var plan policy.Plan
		plan, qjobs, err = decidePhilly(&rep, pol, info, cfg, &in, qjobs, active, now, &hist)
		if err != nil {
			return rep, err
		}
		applyPhillyPlan(plan, active, now)
		nextSubmit := math.Inf(1)
		if next < len(jobs) {
			nextSubmit = jobs[next].submit
		}
		t, err := nextPhillyDecision(now, iv, nextSubmit, active, policyName)
		if err != nil {
			return rep, err
		}
		var done int
		active, done = advancePhilly(active, now, t, &hist)
		finished += done
		now = t
	}
	summarizePhilly(&rep, jobs)
	rep.Wall = time.Since(start)
	rep.PeakRSSBytes = peakRSS()
	return rep, nil
}

// loadPhillyJobs reads the trace at path and builds cfg's cluster; a job
// larger than the cluster is an error.
func loadPhillyJobs(cfg engine.Config, path string) (policy.Cluster, []*phillyJob, error) {
	rows, err := workload.ReadPhilly(path)
	if err != nil {
		return policy.Cluster{}, nil, err
	}
	cluster := policy.Cluster{}
	capacity := 0
	for n := 0; n < cfg.Nodes; n++ {
		cluster.Nodes = append(cluster.Nodes, policy.Node{ID: fmt.Sprintf("node-%05d", n), GPUs: cfg.GPUsPerNode})
		capacity += cfg.GPUsPerNode
	}
	base := rows[0].Submit
	jobs := make([]*phillyJob, 0, len(rows))
	for i, r := range rows {
		if r.GPUs > capacity {
			return policy.Cluster{}, nil, fmt.Errorf("%s: job %d asks %d GPUs, the cluster has %d", path, i, r.GPUs, capacity)
		}
		jobs = append(jobs, &phillyJob{id: fmt.Sprintf("philly-%05d", i), gpus: r.GPUs, submit: r.Submit.Sub(base).Seconds(),
			work: math.Max(r.Duration, 1), completion: -1, vc: r.Cluster})
	}
	return cluster, jobs, nil
}

// decidePhilly asks the policy (through the queues, when configured) for
// the active jobs' plan at now. in and qjobs are buffers reused across
// rounds; the queue view is returned for the next round's reuse.
func decidePhilly(rep *PhillyReport, pol policy.Policy, info policy.Info, cfg engine.Config, in *policy.Input, qjobs []queue.Job,
	active []*phillyJob, now float64, hist *residualWork) (policy.Plan, []queue.Job, error) {
	in.Now = engine.At(now)
	in.Jobs = in.Jobs[:0]
	for _, j := range active {
		in.Jobs = append(in.Jobs, phillyPolicyJob(info, j, now, hist))
	}
	qjobs = qjobs[:0]
	if cfg.Queues.Enabled() {
		for i, j := range active {
			qjobs = append(qjobs, engine.QueueView(&in.Jobs[i], j.vc, now, j.resumed))
		}
	}
	t0 := time.Now()
	plan, _, err := engine.PlanWithQueues(pol, cfg.Queues, *in, qjobs)
	rep.PolicyTime += time.Since(t0)
	rep.Rounds++
	return plan, qjobs, err
}

// applyPhillyPlan gives each active job its planned allocation; a job
// that gets GPUs pays the restart penalty.
func applyPhillyPlan(plan policy.Plan, active []*phillyJob, now float64) {
	for i, j := range active {
		jp := plan.Jobs[i]
		if !jp.Changed {
			continue
		}
		if jp.Workers > 0 {
			j.rescale = engine.RestartPenalty
			if j.w > 0 || j.attained > 0 {
				j.restarts++
			}
			if j.w == 0 {
				j.resumed = now
			}
		}
		j.w, j.alloc = jp.Workers, jp.Placement
	}
}

// advancePhilly runs the active jobs from now to t and returns those still
// running and how many finished (whose work joins hist).
func advancePhilly(active []*phillyJob, now, t float64, hist *residualWork) ([]*phillyJob, int) {
	finished := 0
	keep := active[:0]
	for _, j := range active {
		j.advance(now, t-now)
		if j.completion >= 0 {
			finished++
			hist.add(j.work)
			continue
		}
		keep = append(keep, j)
	}
	for k := len(keep); k < len(active); k++ {
		active[k] = nil
	}
	return keep, finished
}

// summarizePhilly fills rep's JCT statistics, makespan and restarts.
func summarizePhilly(rep *PhillyReport, jobs []*phillyJob) {
	jcts := make([]float64, len(jobs))
	var sum, last float64
	for i, j := range jobs {
		jcts[i] = j.completion - j.submit
		sum += jcts[i]
		last = math.Max(last, j.completion)
		rep.Restarts += j.restarts
	}
	sort.Float64s(jcts)
	rep.AvgJCT = sum / float64(len(jobs))
	rep.MedianJCT = jcts[len(jcts)/2]
	rep.P99JCT = jcts[len(jcts)*99/100]
	rep.Makespan = last - jobs[0].submit
}

// record is the job's history at now, as the live planner reads one
// (history.Live.Record).
func (j *phillyJob) record(now float64) history.Record {
	return history.Record{ID: j.id, Submitted: engine.At(j.submit), Now: engine.At(now), Attained: j.attained,
		Restarts: j.restarts, Current: policy.Allocation{Workers: j.w, Placement: j.alloc},
		RestartCost: engine.Seconds(engine.RestartPenalty)}
}

// request is what the job asks: its trace row's GPUs, one whole GPU per
// worker, any size from one GPU up to them for a policy that may choose.
func (j *phillyJob) request() history.Request {
	return history.Request{Requested: j.gpus, Min: 1, Max: j.gpus, Worker: policy.Demand{GPUMilli: policy.MilliGPU}}
}

// phillyPolicyJob is the job as the policy sees it at now: its record,
// sized by the policy's traits (history.Record.PolicyJob), with the speed
// and remaining work the policy's class allows (phillyLimits; hist may be
// nil for a policy that fixes job sizes, which reads neither).
func phillyPolicyJob(info policy.Info, j *phillyJob, now float64, hist *residualWork) policy.Job {
	pj := j.record(now).PolicyJob(info.Traits, j.request())
	phillyLimits(info, j, &pj, hist)
	return pj
}

// phillyLimits sets a Philly job's speed and remaining work as the
// policy's traits and class allow. The trace records only each job's
// duration at its requested GPUs, so the speed is linear up to the request
// (an assumption, the same for every policy). Oracle policies get the exact
// remaining work; the others the mean residual work of finished jobs that
// ran at least as long as this one has (1 s before any finished).
func phillyLimits(info policy.Info, j *phillyJob, pj *policy.Job, hist *residualWork) {
	if !history.Explores(info.Traits) {
		return // at its requested size: no speed model needed
	}
	g := float64(j.gpus)
	pj.Speed = policy.SpeedFunc(func(s policy.Shape) float64 { return float64(min(s.Workers, int(g))) / g })
	switch info.Class {
	case policy.ClassOracle:
		pj.Remaining = j.work - j.done
	default:
		pj.Remaining = hist.after(j.done)
	}
}

// residualWork holds the work of finished jobs, sorted, with suffix sums,
// to answer E[W - a | W > a] (the mean residual work after a) in log time.
type residualWork struct {
	work   []float64 // sorted ascending
	suffix []float64 // suffix[i] = sum(work[i:])
	dirty  bool
}

func (r *residualWork) add(w float64) { r.work = append(r.work, w); r.dirty = true }

func (r *residualWork) after(a float64) float64 {
	if r.dirty {
		sort.Float64s(r.work)
		r.suffix = make([]float64, len(r.work)+1)
		for i := len(r.work) - 1; i >= 0; i-- {
			r.suffix[i] = r.suffix[i+1] + r.work[i]
		}
		r.dirty = false
	}
	i := sort.SearchFloat64s(r.work, a+1e-9)
	n := len(r.work) - i
	if n == 0 {
		return math.Max(a, 1) // nothing finished ran this long: as much again as done
	}
	return math.Max(r.suffix[i]/float64(n)-a, 1)
}

// nextPhillyDecision is when a Philly replay decides next: the next arrival
// (nextSubmit, +Inf when none is left) or the first completion, on the
// interval grid, and at least one interval after now. It fails with ErrStuck
// when neither will ever come.
func nextPhillyDecision[J interface{ finishIn() float64 }](now, iv, nextSubmit float64, active []J, under string) (float64, error) {
	grid := func(t float64) float64 { return math.Ceil(t/iv-1e-9) * iv }
	t := grid(nextSubmit)
	for _, j := range active {
		if f := j.finishIn(); !math.IsInf(f, 1) {
			t = math.Min(t, grid(now+f))
		}
	}
	if math.IsInf(t, 1) {
		return 0, fmt.Errorf("%w: %d jobs can never run under %s", engine.ErrStuck, len(active), under)
	}
	return math.Max(t, now+iv), nil
}
