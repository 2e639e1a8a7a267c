package packsim

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/caravan-nomad/caravan/planner/packing"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
)

// Policy is one of the three ways of sharing GPUs compared.
type Policy string

const (
	// WholeGPU gives every worker a whole GPU (no packing).
	WholeGPU Policy = "whole-gpu"
	// Static packs workers at their declared shares, best fit, and never
	// looks at how they run (Big Brain's fixed concurrency).
	Static Policy = "static"
	// Introspective right-sizes each job's shares from measured memory and
	// throughput (planner/rightsize) and packs and unpacks by measured gain
	// (planner/packing).
	Introspective Policy = "introspective"
)

// Policies lists them in table order.
var Policies = []Policy{WholeGPU, Static, Introspective}

// Class is the information class of what the policy reads: the whole-GPU
// and static policies read declared sizes only; the introspective one
// also what was measured so far. None reads the future.
func (p Policy) Class() string {
	if p == Introspective {
		return "online"
	}
	return "declared"
}

// Config describes the simulated cluster and the loop.
type Config struct {
	GPUs   int  // GPUs in the cluster
	Shares int  // shares per GPU (default 4, the device plugin's default)
	MPS    bool // every GPU runs MPS (else time-slicing)
	// Interval is the planning interval in seconds (default 60).
	Interval float64
	// Backfill is how many waiting jobs, in arrival order, a round
	// considers (default 32); later ones wait for a later round.
	Backfill int
	// Packing is the introspective policy's configuration (default
	// packing.DefaultConfig, examining every shared GPU).
	Packing packing.Config
	// Record keeps the per-round utilisation in Result.Trace.
	Record bool
}

func (c Config) withDefaults() Config {
	if c.Shares <= 0 {
		c.Shares = 4
	}
	if c.Interval <= 0 {
		c.Interval = 60
	}
	if c.Backfill <= 0 {
		c.Backfill = 32
	}
	if c.Packing == (packing.Config{}) {
		c.Packing = packing.DefaultConfig()
		c.Packing.MaxCandidates = c.GPUs // every shared GPU, as static packing's best fit examines
	}
	return c
}

// Spec is one job of a workload.
type Spec struct {
	ID, Kind string
	Submit   float64 // seconds
	Workers  int
	// Work is the job's run time in seconds alone on whole GPUs at its
	// workers (the trace's duration).
	Work    float64
	Profile Profile
	Never   bool // caravan_pack = "never"
}

// Result is one replay's figures.
type Result struct {
	Policy   Policy
	Mix      string
	MPS      bool
	Jobs     int
	GPUs     int
	AvgJCT   float64 // seconds
	Makespan float64 // seconds
	// UtilWait is the cluster's modelled GPU utilisation (the fraction of
	// its compute kept busy) over the time some job waited; UtilAll over
	// the makespan.
	UtilWait, UtilAll float64
	// WaitShare is the share of the makespan in which some job waited.
	WaitShare float64
	// Slow counts jobs that ran below SlowRatio of their speed alone at
	// their declared shares for more than SlowRounds planning rounds in all.
	Slow                              int
	Packs, Unpacks, Resizes, Restarts int
	Rounds                            int
	DecideTime                        time.Duration
	Trace                             []Point
	Allocated                         float64 // mean shares held / shares in the cluster over the makespan
	JCTs                              []float64
	waitTime                          float64
}

// Point is the cluster over one stretch between decisions.
type Point struct {
	Time, Util float64
	Running    int
	Waiting    int
}

// SlowRatio and SlowRounds define a slow job (issue 31: no job below 0.7x
// its solo rate for more than two planning rounds).
const (
	SlowRatio  = 0.7
	SlowRounds = 2.0
)

// ErrStuck: a job can never run on the cluster.
var ErrStuck = errors.New("packing simulation stuck")

// job is one job's state.
type job struct {
	spec       *Spec
	shares     int
	gpus       []int
	done       float64
	rescale    float64
	completion float64
	placed     int64
	attained   float64
	restarts   int
	ran        bool
	// online measurements
	solo, packed           float64
	soloRounds, packRounds int
	soloAt                 map[int]float64
	histSum                float64
	histN                  int
	nbVersion              int64
	checkedShares          int
	avoid                  []string
	// this stretch
	rate, eff  float64
	slowRounds float64
}

// sim is one replay.
type sim struct {
	cfg     Config
	pol     Policy
	res     [][]*job
	version []int64
	free    []int // free shares per GPU
	waiting []*job
	running []*job
	seq     int64
	out     Result
	rates   []float64
	rbuf    []resident
	// reused by decidePacking
	gpus  []packing.GPU
	views []packing.Job
	byID  map[string]*job
}

// Run replays specs (any order) under pol.
func Run(cfg Config, pol Policy, specs []Spec) (Result, error) {
	cfg = cfg.withDefaults()
	if cfg.GPUs < 1 {
		return Result{}, fmt.Errorf("gpus %d: want >= 1", cfg.GPUs)
	}
	jobs := make([]*job, len(specs))
	for i := range specs {
		sp := &specs[i]
		if sp.Workers > cfg.GPUs {
			return Result{}, fmt.Errorf("%w: job %s asks %d GPUs, the cluster has %d", ErrStuck, sp.ID, sp.Workers, cfg.GPUs)
		}
		if sp.Workers < 1 || sp.Profile.Declared < 1 || sp.Profile.Declared > cfg.Shares {
			return Result{}, fmt.Errorf("job %s: workers %d, declared shares %d: want >= 1 and declared <= %d", sp.ID, sp.Workers, sp.Profile.Declared, cfg.Shares)
		}
		jobs[i] = &job{spec: sp, completion: -1, shares: sp.Profile.Declared, soloAt: map[int]float64{}}
		if pol == WholeGPU {
			jobs[i].shares = cfg.Shares
		}
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].spec.Submit < jobs[b].spec.Submit })
	s := &sim{cfg: cfg, pol: pol, res: make([][]*job, cfg.GPUs), version: make([]int64, cfg.GPUs), free: make([]int, cfg.GPUs)}
	for g := range s.free {
		s.free[g] = cfg.Shares
	}
	s.out = Result{Policy: pol, MPS: cfg.MPS, Jobs: len(jobs), GPUs: cfg.GPUs}
	if len(jobs) == 0 {
		return s.out, nil
	}
	return s.loop(jobs)
}

func (s *sim) loop(jobs []*job) (Result, error) {
	iv := s.cfg.Interval
	grid := func(t float64) float64 { return math.Ceil(t/iv-1e-9) * iv }
	now, next, finished := grid(jobs[0].spec.Submit), 0, 0
	first := jobs[0].spec.Submit
	var allocated float64
	for finished < len(jobs) {
		for next < len(jobs) && jobs[next].spec.Submit <= now {
			s.waiting = append(s.waiting, jobs[next])
			next++
		}
		t0 := time.Now()
		changed, err := s.decide(now)
		s.out.DecideTime += time.Since(t0)
		s.out.Rounds++
		if err != nil {
			return s.out, err
		}
		s.computeRates()
		t := math.Inf(1)
		if next < len(jobs) {
			t = grid(jobs[next].spec.Submit)
		}
		for _, j := range s.running {
			if j.rate > 0 {
				t = math.Min(t, grid(now+j.rescale+(j.spec.Work-j.done)/j.rate))
			}
		}
		if changed {
			t = now + iv
		}
		if math.IsInf(t, 1) {
			return s.out, fmt.Errorf("%w: %d jobs wait and none runs under %s", ErrStuck, len(s.waiting), s.pol)
		}
		t = math.Max(t, now+iv)
		dt := t - now
		for _, j := range s.running {
			s.advance(j, now, dt)
		}
		util := s.util(dt)
		held := 0
		for _, f := range s.free {
			held += s.cfg.Shares - f
		}
		allocated += float64(held) / float64(s.cfg.Shares*s.cfg.GPUs) * dt
		s.out.UtilAll += util * dt
		if len(s.waiting) > 0 {
			s.out.UtilWait += util * dt
			s.out.waitTime += dt
		}
		if s.cfg.Record {
			s.out.Trace = append(s.out.Trace, Point{Time: now - first, Util: util, Running: len(s.running), Waiting: len(s.waiting)})
		}
		keep := s.running[:0]
		for _, j := range s.running {
			if j.completion >= 0 {
				finished++
				s.release(j)
				continue
			}
			s.measure(j)
			keep = append(keep, j)
		}
		clear(s.running[len(keep):])
		s.running = keep
		now = t
	}
	return s.summary(jobs, first, allocated), nil
}

func (s *sim) summary(jobs []*job, first, allocated float64) Result {
	last := 0.0
	for _, j := range jobs {
		jct := j.completion - j.spec.Submit
		s.out.JCTs = append(s.out.JCTs, jct)
		s.out.AvgJCT += jct / float64(len(jobs))
		last = math.Max(last, j.completion)
		s.out.Restarts += j.restarts
		if j.slowRounds > SlowRounds {
			s.out.Slow++
		}
	}
	s.out.Makespan = last - first
	if s.out.Makespan > 0 {
		s.out.UtilAll /= s.out.Makespan
		s.out.Allocated = allocated / s.out.Makespan
		s.out.WaitShare = s.out.waitTime / s.out.Makespan
	}
	if s.out.waitTime > 0 {
		s.out.UtilWait /= s.out.waitTime
	}
	return s.out
}

// advance runs job j for dt seconds from now at its rate.
func (s *sim) advance(j *job, now, dt float64) {
	d := math.Min(j.rescale, dt)
	j.rescale -= d
	j.attained += dt * float64(len(j.gpus)*j.shares) / float64(s.cfg.Shares)
	j.eff = 0
	if j.rate <= 0 || dt-d <= 0 {
		return
	}
	eff := dt - d
	if need := (j.spec.Work - j.done) / j.rate; need <= eff {
		j.done, j.completion, eff = j.spec.Work, now+d+need, need
	} else {
		j.done += j.rate * eff
	}
	j.eff = eff
	if j.rate < SlowRatio*s.soloRef(j) {
		j.slowRounds += eff / s.cfg.Interval
	}
}

// soloRef is the job's speed alone at its declared shares: what the user
// asked for, the reference of the slow-job count.
func (s *sim) soloRef(j *job) float64 {
	s.rbuf = append(s.rbuf[:0], resident{compute: j.spec.Profile.Compute, shares: j.spec.Profile.Declared})
	s.rates = workerRates(s.cfg.MPS, s.cfg.Shares, s.rbuf, s.rates)
	return s.rates[0]
}

// computeRates sets every running job's rate: the slowest of its workers
// under the interference model.
func (s *sim) computeRates() {
	for _, j := range s.running {
		j.rate = math.Inf(1)
	}
	for _, res := range s.res {
		if len(res) == 0 {
			continue
		}
		s.rbuf = s.rbuf[:0]
		for _, j := range res {
			s.rbuf = append(s.rbuf, resident{compute: j.spec.Profile.Compute, shares: j.shares})
		}
		s.rates = workerRates(s.cfg.MPS, s.cfg.Shares, s.rbuf, s.rates)
		for k, j := range res {
			j.rate = math.Min(j.rate, s.rates[k])
		}
	}
}

// util is the cluster's modelled busy fraction over a stretch of dt: per
// GPU the sum of its jobs' compute times speed over the part of the
// stretch they progressed, at most 1.
func (s *sim) util(dt float64) float64 {
	busy := 0.0
	for _, res := range s.res {
		u := 0.0
		for _, j := range res {
			u += j.spec.Profile.Compute * j.rate * j.eff / dt
		}
		busy += math.Min(u, 1)
	}
	return busy / float64(s.cfg.GPUs)
}

// measure records what job j showed over the last stretch (online): its
// rate alone, or next to its current neighbours.
func (s *sim) measure(j *job) {
	if j.eff <= 0 {
		return
	}
	rounds := max(1, int(math.Round(j.eff/s.cfg.Interval)))
	rate := 100 * j.rate // samples/s per worker: the policy reads ratios only
	if s.alone(j) {
		j.solo, j.soloAt[j.shares] = rate, rate
		j.soloRounds += rounds
		return
	}
	j.packed = rate
	j.packRounds += rounds
}

func (s *sim) alone(j *job) bool {
	for _, g := range j.gpus {
		if len(s.res[g]) > 1 {
			return false
		}
	}
	return true
}

// neighbourhood is a number that changes whenever the residents of one of
// j's GPUs change; a new neighbourhood folds the packed rate measured in
// the old one into the job's history.
func (s *sim) neighbourhood(j *job) {
	v := int64(0)
	for _, g := range j.gpus {
		v += s.version[g]
	}
	if v == j.nbVersion {
		return
	}
	j.nbVersion = v
	if j.packRounds > 0 && j.solo > 0 {
		j.histSum += math.Min(j.packed/j.solo, s.cfg.Packing.MaxRatio)
		j.histN++
	}
	j.packed, j.packRounds = 0, 0
}

// hold puts j's workers on gpus.
func (s *sim) hold(j *job, gpus []int) {
	j.gpus = append(j.gpus[:0], gpus...)
	for _, g := range gpus {
		s.res[g] = append(s.res[g], j)
		s.free[g] -= j.shares
		s.version[g]++
	}
}

// release frees j's GPUs.
func (s *sim) release(j *job) {
	for _, g := range j.gpus {
		for k, o := range s.res[g] {
			if o == j {
				s.res[g] = append(s.res[g][:k], s.res[g][k+1:]...)
				break
			}
		}
		s.free[g] += j.shares
		s.version[g]++
	}
	j.gpus = j.gpus[:0]
}

// start (re)starts j on gpus: the artifact's restart penalty, counted as a
// restart unless it is the job's first start.
func (s *sim) start(j *job, gpus []int) {
	s.hold(j, gpus)
	j.rescale = engine.RestartPenalty
	if j.ran {
		j.restarts++
	}
	j.ran = true
	s.seq++
	j.placed = s.seq
	s.running = append(s.running, j)
}

func (s *sim) stop(j *job) {
	s.release(j)
	for k, o := range s.running {
		if o == j {
			s.running = append(s.running[:k], s.running[k+1:]...)
			break
		}
	}
}
