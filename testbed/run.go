package testbed

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/internal/allocs"
	"github.com/caravan-nomad/caravan/internal/cluster"
	"github.com/caravan-nomad/caravan/internal/jobtime"
)

// Static is the baseline "policy": no planner, each job at its requested
// workers, queued by Nomad alone.
const Static = "static"

const elasticSpec = "jobspecs/train-elastic.nomad.hcl"

// Config is how the testbed drives the cluster.
type Config struct {
	Target  cluster.Config // the cluster, the Nomad CLI and the caravan binary
	Cluster Cluster
	// Interval and Cooldown are the planner's (jobspecs/planner.nomad.hcl).
	Interval, Cooldown time.Duration
	// ResizeCost is what every job declares a resize costs it
	// (jobspecs/train-elastic.nomad.hcl's resize_cost).
	ResizeCost time.Duration
	// Quantum is the planner's suspend quantum (time-slicing).
	Quantum time.Duration
	// ReportSteps is the steps between two progress reports of a job's
	// coordinator (the trainer's -log-every).
	ReportSteps int
	// Timeout bounds one policy run.
	Timeout time.Duration
	// Poll is how often Nomad is read; Progress how often a line is printed.
	Poll, Progress time.Duration
	// CheckpointInterval is the coordinators' periodic checkpoint interval.
	CheckpointInterval string
	// Prefix starts every testbed job's ID (purged between runs).
	Prefix string
}

// Run is one policy's run on the cluster.
type Run struct {
	Policy  string
	Start   time.Time
	End     time.Time
	Records []JobRecord
	Jobs    []JobMetrics // workload order
	Summary Summary
	// TimedOut is set when the run ended before every job finished.
	TimedOut bool
}

// runner runs one policy.
type runner struct {
	cfg    Config
	c      *cluster.Cluster
	nomad  *nomadapi.Client
	out    io.Writer
	policy string
	jobs   []Job
	start  time.Time
	recs   map[string]*JobRecord
	// submitted counts the jobs submitted so far (workload order).
	submitted int
}

// RunPolicy purges earlier testbed jobs and the planner, starts the planner
// with the policy (none for Static), submits the workload at its arrival
// times and reads Nomad until every job has finished.
func RunPolicy(ctx context.Context, cfg Config, pol string, jobs []Job, out io.Writer) (*Run, error) {
	c, err := dial(cfg, out)
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, c: c, nomad: c.Nomad, out: out, policy: pol, jobs: jobs, recs: map[string]*JobRecord{}}
	if err := purge(ctx, c, cfg.Prefix); err != nil {
		return nil, fmt.Errorf("purging the previous run: %w", err)
	}
	if pol != Static {
		addr, err := c.StartPlanner(ctx, "policy="+pol, "count=1",
			"interval="+cfg.Interval.String(), "cooldown="+cfg.Cooldown.String(), "suspend_quantum="+cfg.Quantum.String())
		if err != nil {
			return nil, fmt.Errorf("starting the planner with policy %s: %w", pol, err)
		}
		c.Say("planner (policy %s) at http://%s", pol, addr)
	}
	r.start = time.Now()
	run := &Run{Policy: pol, Start: r.start}
	err = r.loop(ctx)
	run.End = time.Now()
	run.TimedOut = err == errTimeout
	if err != nil && err != errTimeout {
		return run, err
	}
	if err := r.readSubmitTimes(); err != nil {
		return run, err
	}
	run.Records = r.records()
	for _, rec := range run.Records {
		run.Jobs = append(run.Jobs, JobMetricsOf(rec, run.End))
	}
	run.Summary = Summarize(pol, run.Jobs, cfg.Cluster)
	return run, nil
}

var errTimeout = fmt.Errorf("timed out")

// loop submits jobs as they arrive and polls Nomad until all are done.
func (r *runner) loop(ctx context.Context) error {
	tick := time.NewTicker(r.cfg.Poll)
	defer tick.Stop()
	lastSaid := time.Time{}
	for {
		if err := r.submitDue(ctx); err != nil {
			return err
		}
		done, err := r.poll()
		if err != nil {
			fmt.Fprintf(r.out, "    (reading Nomad: %v)\n", err)
		}
		if time.Since(lastSaid) >= r.cfg.Progress || done {
			r.progress()
			lastSaid = time.Now()
		}
		if done {
			return nil
		}
		if time.Since(r.start) > r.cfg.Timeout {
			return errTimeout
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// submitDue submits every job whose arrival time has come.
func (r *runner) submitDue(ctx context.Context) error {
	for r.submitted < len(r.jobs) && time.Since(r.start) >= r.jobs[r.submitted].Arrival {
		j := r.jobs[r.submitted]
		at := time.Now()
		_, err := r.c.Submit(ctx, elasticSpec, "name="+j.Name, "caravan_bin="+r.cfg.Target.CaravanBin,
			"workers="+strconv.Itoa(j.Workers), "ps=1", "shares="+strconv.Itoa(r.cfg.Cluster.WorkerShares),
			"steps="+strconv.Itoa(j.Steps), "compute_per_sample="+j.ComputePerSample.String(),
			"checkpoint_interval="+r.cfg.CheckpointInterval, "resize_cost="+r.cfg.ResizeCost.String(),
			fmt.Sprintf(`trainer_args=["-log-every", "%d"]`, r.cfg.ReportSteps))
		if err != nil {
			return fmt.Errorf("submitting %s: %w", j.Name, err)
		}
		r.recs[j.Name] = &JobRecord{Name: j.Name, Submitted: at}
		r.submitted++
	}
	return nil
}

// poll reads every submitted job's status and allocations; it reports
// whether every job has finished.
func (r *runner) poll() (bool, error) {
	finished := 0
	for _, j := range r.jobs[:r.submitted] {
		rec := r.recs[j.Name]
		job, _, err := r.nomad.Jobs().Info(j.Name, nil)
		if err != nil {
			return false, err
		}
		stubs, _, err := r.nomad.Jobs().Allocations(j.Name, true, nil)
		if err != nil {
			return false, err
		}
		stubs = allocs.Current(job, stubs)
		mergeAllocs(rec, stubs)
		rec.Dead = completed(job, stubs)
		if rec.Dead {
			finished++
		}
	}
	return r.submitted == len(r.jobs) && finished == len(r.jobs), nil
}

// completed reports whether a job finished its training: dead with its
// parameter servers still asked for (a job the planner suspended to zero
// is dead too, but waits to be resumed), or stopped after its coordinator
// exited successfully on its own (the planner stops a finished job whose
// stray workers still wait).
func completed(job *nomadapi.Job, allocs []*nomadapi.AllocationListStub) bool {
	if job.Status == nil || *job.Status != "dead" {
		return false
	}
	if job.Stop != nil && *job.Stop {
		for _, a := range allocs {
			if a.TaskGroup == psGroup && a.ClientStatus == "complete" && a.DesiredStatus == "run" {
				return true
			}
		}
		return false
	}
	for _, tg := range job.TaskGroups {
		if tg.Name != nil && *tg.Name == psGroup && tg.Count != nil && *tg.Count == 0 {
			return false
		}
	}
	return true
}

// mergeAllocs records the allocations' latest state; events are kept
// cumulatively because Nomad keeps only a task's last ten.
func mergeAllocs(rec *JobRecord, stubs []*nomadapi.AllocationListStub) {
	byID := map[string]int{}
	for i, a := range rec.Allocs {
		byID[a.ID] = i
	}
	for _, s := range stubs {
		a := allocRecord(s)
		i, ok := byID[s.ID]
		if !ok {
			rec.Allocs = append(rec.Allocs, a)
			continue
		}
		a.Events = mergeEvents(rec.Allocs[i].Events, a.Events)
		rec.Allocs[i] = a
	}
}

func allocRecord(s *nomadapi.AllocationListStub) AllocRecord {
	a := AllocRecord{ID: s.ID, Group: s.TaskGroup, Node: s.NodeName, Created: time.Unix(0, s.CreateTime), Status: s.ClientStatus}
	for _, ts := range s.TaskStates {
		if ts == nil {
			continue
		}
		a.Started, a.Finished = ts.StartedAt, ts.FinishedAt
		for _, e := range ts.Events {
			a.Events = append(a.Events, Event{Time: time.Unix(0, e.Time), Type: e.Type, Message: e.DisplayMessage, Details: e.Details})
		}
	}
	return a
}

// mergeEvents adds the events of b that a lacks, in time order.
func mergeEvents(a, b []Event) []Event {
	seen := map[string]bool{}
	for _, e := range a {
		seen[e.Time.String()+e.Type+e.Message] = true
	}
	out := append([]Event(nil), a...)
	for _, e := range b {
		if !seen[e.Time.String()+e.Type+e.Message] {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

// readSubmitTimes reads each job's first submission from Nomad's records
// that survive its scales (internal/jobtime: version 0 while Nomad keeps
// it, else the registration's evaluation or the first allocation; a
// planner scaling writes a new version with a new submit time, and Nomad
// keeps the last six); when Nomad holds none, the time the testbed ran
// `nomad job run` stands.
func (r *runner) readSubmitTimes() error {
	for _, j := range r.jobs[:r.submitted] {
		rec, err := jobtime.Read(r.nomad, j.Name, nil)
		if err != nil {
			return err
		}
		if t := rec.Submitted(); !t.IsZero() {
			r.recs[j.Name].Submitted = t
		}
	}
	return nil
}

func (r *runner) records() []JobRecord {
	var out []JobRecord
	for _, j := range r.jobs[:r.submitted] {
		out = append(out, *r.recs[j.Name])
	}
	return out
}

// progress prints one line on where the run stands.
func (r *runner) progress() {
	recs := r.records()
	now := time.Now()
	s := Timeline(recs, r.cfg.Cluster, now, now, time.Second)
	line := Point{}
	if len(s) > 0 {
		line = s[0]
	}
	fmt.Fprintf(r.out, "    [%s %s] submitted %d/%d, running %d, queued %d, finished %d, workers %d (GPU util %.0f%%)\n",
		r.policy, time.Since(r.start).Round(time.Second), r.submitted, len(r.jobs), line.Running, line.Queued,
		line.Finished, line.Workers, 100*line.Util)
}

// dial connects to cfg.Target; progress lines go to out, indented.
func dial(cfg Config, out io.Writer) (*cluster.Cluster, error) {
	t := cfg.Target
	t.Say = func(format string, args ...any) { fmt.Fprintf(out, "    "+format+"\n", args...) }
	return cluster.Dial(t)
}

// Purge stops and purges every job whose ID starts with cfg.Prefix, and
// the planner, so each policy run starts on an idle cluster; what it did
// is said on out.
func Purge(ctx context.Context, cfg Config, out io.Writer) error {
	c, err := dial(cfg, out)
	if err != nil {
		return err
	}
	return purge(ctx, c, cfg.Prefix)
}

func purge(ctx context.Context, c *cluster.Cluster, prefix string) error {
	stubs, _, err := c.Nomad.Jobs().PrefixList(prefix)
	if err != nil {
		return err
	}
	ids := []string{cluster.PlannerJob}
	for _, s := range stubs {
		if strings.HasPrefix(s.ID, prefix) {
			ids = append(ids, s.ID)
		}
	}
	purged, err := c.Purge(ctx, ids...)
	if len(purged) > 0 {
		c.Say("purged %d jobs of an earlier run (and the planner)", len(purged))
	}
	return err
}

// CheckClients fails unless Nomad has exactly the ready, eligible clients
// the run is planned for (cfg.Cluster.Nodes): a testbed measured on another
// shape than the one it reports and simulates would compare nothing.
func CheckClients(ctx context.Context, cfg Config) error {
	c, err := cluster.Dial(cfg.Target)
	if err != nil {
		return err
	}
	nodes, _, err := c.Nomad.Nodes().List((&nomadapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("listing Nomad's clients: %w", err)
	}
	ready := 0
	for _, n := range nodes {
		if n.Status == "ready" && n.SchedulingEligibility == "eligible" {
			ready++
		}
	}
	if ready != cfg.Cluster.Nodes {
		return fmt.Errorf("--clients %d: Nomad has %d ready clients (start the cluster with CARAVAN_CLIENTS=%d, or run make testbed CLIENTS=%d)",
			cfg.Cluster.Nodes, ready, cfg.Cluster.Nodes, cfg.Cluster.Nodes)
	}
	return nil
}
