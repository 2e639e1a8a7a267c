package philly

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/queue"
	"github.com/caravan-nomad/caravan/planner/simulator/engine"
	"github.com/caravan-nomad/caravan/planner/workload"
)

// QueueMode is how the Philly teams share the cluster in a queue replay.
type QueueMode string

// The four ways of sharing compared by ReplayPhillyQueues.
const (
	// ModeStrict: each virtual cluster uses at most its guarantee (Philly
	// as it ran); a job larger than its whole guarantee runs alone in it.
	ModeStrict QueueMode = "strict"
	// ModeShared: one queue holds every job, no guarantees (one shared
	// pool, FIFO order with backfilling, the same admission code).
	ModeShared QueueMode = "shared"
	// ModeBorrow: guarantees, idle GPUs lent, never taken back.
	ModeBorrow QueueMode = "borrow"
	// ModeReclaim: guarantees, idle GPUs lent, taken back by
	// checkpoint-suspending borrowers (caravan).
	ModeReclaim QueueMode = "reclaim"
)

// QueueModes lists the modes in report order.
var QueueModes = []QueueMode{ModeStrict, ModeShared, ModeBorrow, ModeReclaim}

// Checkpoint model of the queue replay (modelled, not measured): a job's
// checkpoint is CheckpointGBPerGPU per GPU it asks for; commit and restore
// run at the low ends of the store's measured throughput (README:
// 1315-1460 MB/s commit, 697-1067 MB/s cold restore, 1 GiB).
const (
	CheckpointGBPerGPU = 2.0
	CommitMBps         = 1315.0
	RestoreMBps        = 697.0
)

// CheckpointTimes returns the modelled commit and restore seconds of a
// job of gpus GPUs.
func CheckpointTimes(gpus int) (commit, restore float64) {
	mb := CheckpointGBPerGPU * 1000 * float64(gpus)
	return mb / CommitMBps, mb / RestoreMBps
}

// VCStats is one virtual cluster's outcome under one mode.
type VCStats struct {
	VC        string  `json:"vc"`
	Jobs      int     `json:"jobs"`
	GPUShare  float64 `json:"gpu_time_share"` // of the trace's GPU time
	Guarantee int     `json:"guarantee_gpus"`
	MeanWait  float64 `json:"mean_wait_s"`
	P99Wait   float64 `json:"p99_wait_s"`
	MeanJCT   float64 `json:"mean_jct_s"`
	Slowdown  float64 `json:"mean_slowdown"` // mean of JCT / run time at the requested size
	waits     []float64
}

// Waits are the waits of the virtual cluster's jobs, in seconds.
func (s VCStats) Waits() []float64 { return s.waits }

// QueueReport is one mode's replay of the Philly trace as its teams.
type QueueReport struct {
	Mode        QueueMode `json:"mode"`
	Jobs        int       `json:"jobs"`
	GPUs        int       `json:"cluster_gpus"`
	Oversize    int       `json:"oversize_jobs"` // jobs larger than their VC's guarantee
	MeanWait    float64   `json:"mean_wait_s"`
	MeanJCT     float64   `json:"mean_jct_s"`
	Utilisation float64   `json:"utilisation"`
	UsedGPUSec  float64   `json:"used_gpu_s"`
	LostGPUSec  float64   `json:"reclaim_lost_gpu_s"` // modelled commit + restore of every reclaim
	// LostWithRestart adds the replay's restart charge (30 s, charged to
	// every start) of each resume after a reclaim.
	LostWithRestart float64 `json:"reclaim_lost_with_restart_gpu_s"`
	Reclaims        int     `json:"reclaims"`
	Jain            float64 `json:"jain_index"` // over VCs, of 1 / mean slowdown
	Rounds          int     `json:"rounds"`
	Makespan        float64 `json:"makespan_s"`
	Wall            time.Duration
	DecideTime      time.Duration
	VCs             []VCStats `json:"vcs"`
}

// Guarantees gives each virtual cluster of rows whole GPUs of capacity in
// proportion to its share of the trace's GPU time (duration x GPUs),
// largest remainders first, at least one each. It returns the VCs sorted by
// share (largest first), their shares and guarantees.
func Guarantees(rows []workload.PhillyJob, capacity int) (vcs []string, share map[string]float64, quota map[string]int, err error) {
	share = map[string]float64{}
	total := 0.0
	for _, r := range rows {
		gt := r.Duration * float64(r.GPUs)
		if _, ok := share[r.Cluster]; !ok {
			vcs = append(vcs, r.Cluster)
		}
		share[r.Cluster] += gt
		total += gt
	}
	if len(vcs) > capacity {
		return nil, nil, nil, fmt.Errorf("%d virtual clusters cannot each get a GPU of %d", len(vcs), capacity)
	}
	for _, v := range vcs {
		if total > 0 {
			share[v] /= total
		}
	}
	sort.SliceStable(vcs, func(a, b int) bool {
		if share[vcs[a]] != share[vcs[b]] {
			return share[vcs[a]] > share[vcs[b]]
		}
		return vcs[a] < vcs[b]
	})
	quota = map[string]int{}
	sum := 0
	for _, v := range vcs {
		quota[v] = max(int(math.Floor(share[v]*float64(capacity))), 1)
		sum += quota[v]
	}
	byRemainder := append([]string(nil), vcs...)
	rem := func(v string) float64 { return share[v]*float64(capacity) - math.Floor(share[v]*float64(capacity)) }
	sort.SliceStable(byRemainder, func(a, b int) bool { return rem(byRemainder[a]) > rem(byRemainder[b]) })
	for k := 0; sum < capacity; k = (k + 1) % len(vcs) {
		quota[byRemainder[k]]++
		sum++
	}
	for k := 0; sum > capacity; k = (k + 1) % len(vcs) { // the minimums overshot: take from the largest
		if v := vcs[k]; quota[v] > 1 {
			quota[v]--
			sum--
		}
	}
	return vcs, share, quota, nil
}

// queueConfig is the queue config of a mode.
func queueConfig(mode QueueMode, vcs []string, quota map[string]int, capacity int) queue.Config {
	if mode == ModeShared {
		return queue.Config{Queues: []queue.Queue{{Name: "shared", Namespaces: vcs, Guarantee: capacity * policy.MilliGPU,
			BorrowLimit: queue.Unlimited, LendLimit: queue.Unlimited, Weight: 1}}}
	}
	c := queue.Config{NoReclaim: mode != ModeReclaim}
	for _, v := range vcs {
		q := queue.Queue{Name: v, Namespaces: []string{v}, Guarantee: quota[v] * policy.MilliGPU,
			BorrowLimit: queue.Unlimited, LendLimit: queue.Unlimited, Weight: 1}
		if mode == ModeStrict {
			q.BorrowLimit = 0
		}
		c.Queues = append(c.Queues, q)
	}
	return c
}

// qjob is a job of the queue replay.
type qjob struct {
	phillyJob
	started   float64 // last start, for progress lost
	ran       float64 // seconds holding GPUs
	suspended bool
}

// ReplayPhillyQueues replays rows (a Philly trace, sorted by submission)
// with each virtual cluster as a team queue under mode, on cfg's cluster.
// Every round the queues decide admission (planner/queue, the same code as
// the live planner) and the fifo policy places the admitted jobs; the
// trace's durations only advance time (no decision reads them).
func ReplayPhillyQueues(cfg engine.Config, mode QueueMode, rows []workload.PhillyJob) (QueueReport, error) {
	start := time.Now()
	cfg = cfg.WithDefaults()
	if len(rows) == 0 {
		return QueueReport{}, errors.New("no jobs")
	}
	capacity := cfg.Nodes * cfg.GPUsPerNode
	vcs, share, quota, err := Guarantees(rows, capacity)
	if err != nil {
		return QueueReport{}, err
	}
	r := queueReplay{mode: mode, quota: quota, capacity: capacity, qc: queueConfig(mode, vcs, quota, capacity), pol: policy.NewFIFO()}
	r.info = r.pol.Info()
	cluster := policy.Cluster{}
	for n := 0; n < cfg.Nodes; n++ {
		cluster.Nodes = append(cluster.Nodes, policy.Node{ID: fmt.Sprintf("node-%05d", n), GPUs: cfg.GPUsPerNode})
	}
	rep := QueueReport{Mode: mode, Jobs: len(rows), GPUs: capacity}
	jobs, err := r.newJobs(&rep, rows)
	if err != nil {
		return rep, err
	}
	iv := cfg.Interval
	grid := func(t float64) float64 { return math.Ceil(t/iv-1e-9) * iv }
	var active []*qjob
	next, finished := 0, 0
	now := grid(jobs[0].submit)
	var qjobs []queue.Job
	in := policy.Input{Cluster: cluster}
	for finished < len(jobs) {
		for next < len(jobs) && jobs[next].submit <= now {
			active = append(active, jobs[next])
			next++
		}
		qjobs = r.roundJobs(&in, qjobs, active, now)
		if err := r.decide(&rep, in, qjobs, active, now); err != nil {
			return rep, err
		}
		nextSubmit := math.Inf(1)
		if next < len(jobs) {
			nextSubmit = jobs[next].submit
		}
		t, err := nextPhillyDecision(now, iv, nextSubmit, active, string(mode))
		if err != nil {
			return rep, err
		}
		var done int
		active, done = advanceQueueJobs(active, now, t)
		finished += done
		now = t
	}
	summarise(&rep, jobs, vcs, share, quota)
	rep.Wall = time.Since(start)
	return rep, nil
}

// queueReplay is a queue replay's fixed parts: the mode, each VC's
// guarantee in GPUs, the queues and the fifo policy that places.
type queueReplay struct {
	mode     QueueMode
	quota    map[string]int
	capacity int
	qc       queue.Config
	pol      policy.Policy
	info     policy.Info
}

// newJobs builds the replay's jobs from rows, counting in rep the jobs
// larger than their VC's guarantee.
func (r *queueReplay) newJobs(rep *QueueReport, rows []workload.PhillyJob) ([]*qjob, error) {
	base := rows[0].Submit
	jobs := make([]*qjob, len(rows))
	for i, row := range rows {
		if row.GPUs > r.capacity {
			return nil, fmt.Errorf("job %d asks %d GPUs, the cluster has %d", i, row.GPUs, r.capacity)
		}
		jobs[i] = &qjob{phillyJob: phillyJob{id: fmt.Sprintf("philly-%05d", i), gpus: row.GPUs, submit: row.Submit.Sub(base).Seconds(),
			work: math.Max(row.Duration, 1), completion: -1, vc: row.Cluster}}
		if r.mode != ModeShared && row.GPUs > r.quota[row.Cluster] {
			rep.Oversize++
		}
	}
	return jobs, nil
}

// roundJobs builds the round's policy input in in and its queue view in
// qjobs (buffers reused across rounds) and returns the queue view.
func (r *queueReplay) roundJobs(in *policy.Input, qjobs []queue.Job, active []*qjob, now float64) []queue.Job {
	qjobs = qjobs[:0]
	in.Now = engine.At(now)
	in.Jobs = in.Jobs[:0]
	for _, j := range active {
		// As ReplayPhilly builds it: fifo runs the job at its
		// requested GPUs, all or nothing, and needs no estimate of
		// its remaining work (no finished jobs' history).
		pj := phillyPolicyJob(r.info, &j.phillyJob, now, nil)
		qj := queue.FromPolicy(&pj, j.vc, "")
		qj.SinceResume = engine.Seconds(now - j.started)
		if r.mode == ModeStrict && j.gpus > r.quota[j.vc] {
			qj.Min, qj.Max = r.quota[j.vc]*policy.MilliGPU, r.quota[j.vc]*policy.MilliGPU // runs alone in its VC
		}
		qjobs = append(qjobs, qj)
		in.Jobs = append(in.Jobs, pj)
	}
	return qjobs
}

// decide lets the queues decide admission and reclaim, the policy place
// the admitted jobs, and applies both to the active jobs.
func (r *queueReplay) decide(rep *QueueReport, in policy.Input, qjobs []queue.Job, active []*qjob, now float64) error {
	t0 := time.Now()
	round, err := queue.Decide(r.qc, r.capacity*policy.MilliGPU, qjobs)
	if err != nil {
		return err
	}
	if r.mode == ModeStrict {
		aloneFits(round, active, r.capacity)
	}
	sub, kept := queue.Constrain(in, round)
	plan, err := r.pol.Allocate(sub)
	rep.DecideTime += time.Since(t0)
	rep.Rounds++
	if err != nil {
		return err
	}
	commitFor := suspendVictims(rep, round, active)
	for k, jp := range plan.Jobs {
		j := active[kept[k]]
		if !jp.Changed {
			continue
		}
		if jp.Workers > 0 {
			j.rescale = engine.RestartPenalty + commitFor[round.Jobs[kept[k]].Queue]
			if j.suspended {
				_, restore := CheckpointTimes(j.gpus)
				j.rescale += restore
				j.suspended = false
			}
			if j.w > 0 || j.attained > 0 {
				j.restarts++
			}
			j.started = now
		}
		j.w, j.alloc = jp.Workers, jp.Placement
	}
	return nil
}

// suspendVictims suspends the running jobs the round reclaims, counting
// the GPU time lost in rep, and returns each reclaiming queue's longest
// commit of its victims.
func suspendVictims(rep *QueueReport, round queue.Round, active []*qjob) map[string]float64 {
	commitFor := map[string]float64{} // queue -> longest commit of its victims
	for i, d := range round.Jobs {
		if j := active[i]; d.Suspend && j.w > 0 {
			c, r := CheckpointTimes(j.gpus)
			rep.Reclaims++
			rep.LostGPUSec += (c + r) * float64(j.gpus)
			rep.LostWithRestart += (c + r + engine.RestartPenalty) * float64(j.gpus)
			commitFor[d.ReclaimFor] = math.Max(commitFor[d.ReclaimFor], c)
			j.w, j.alloc, j.suspended = 0, nil, true
			j.rescale = 0
		}
	}
	return commitFor
}

// advanceQueueJobs runs the active jobs from now to t, adding to each the
// time it held GPUs, and returns those still running and how many
// finished.
func advanceQueueJobs(active []*qjob, now, t float64) ([]*qjob, int) {
	finished := 0
	keep := active[:0]
	for _, j := range active {
		before := j.attained
		held := j.w
		j.advance(now, t-now)
		if held > 0 {
			j.ran += (j.attained - before) / float64(held)
		}
		if j.completion >= 0 {
			finished++
			continue
		}
		keep = append(keep, j)
	}
	for k := len(keep); k < len(active); k++ {
		active[k] = nil
	}
	return keep, finished
}

// aloneFits withdraws the admission of strict mode's waiting jobs that are
// larger than their VC's guarantee (admitted at their guarantee, to run
// alone in it) while the cluster cannot hold their whole size.
func aloneFits(round queue.Round, active []*qjob, capacity int) {
	used := 0
	for i, d := range round.Jobs {
		if d.Admit {
			used += active[i].gpus
		}
	}
	for i := len(round.Jobs) - 1; i >= 0 && used > capacity; i-- {
		if d := &round.Jobs[i]; d.Admit && active[i].w == 0 && d.Cap < active[i].gpus*policy.MilliGPU {
			d.Admit = false
			used -= active[i].gpus
		}
	}
}

// summarise fills the report's per-VC and overall figures.
func summarise(rep *QueueReport, jobs []*qjob, vcs []string, share map[string]float64, quota map[string]int) {
	by := map[string]*VCStats{}
	for _, v := range vcs {
		by[v] = &VCStats{VC: v, GPUShare: share[v], Guarantee: quota[v]}
	}
	var first, last, waitSum, jctSum float64
	first = math.Inf(1)
	for _, j := range jobs {
		jct := j.completion - j.submit
		wait := math.Max(jct-j.ran, 0)
		s := by[j.vc]
		s.Jobs++
		s.waits = append(s.waits, wait)
		s.MeanWait += wait
		s.MeanJCT += jct
		s.Slowdown += jct / j.work
		waitSum += wait
		jctSum += jct
		rep.UsedGPUSec += j.attained
		first = math.Min(first, j.submit)
		last = math.Max(last, j.completion)
	}
	n := float64(len(jobs))
	rep.MeanWait, rep.MeanJCT = waitSum/n, jctSum/n
	rep.Makespan = last - first
	rep.Utilisation = rep.UsedGPUSec / (float64(rep.GPUs) * rep.Makespan)
	var sx, sx2 float64
	for _, v := range vcs {
		s := by[v]
		k := float64(s.Jobs)
		s.MeanWait /= k
		s.MeanJCT /= k
		s.Slowdown /= k
		sort.Float64s(s.waits)
		s.P99Wait = s.waits[min(len(s.waits)*99/100, len(s.waits)-1)]
		x := 1 / s.Slowdown
		sx += x
		sx2 += x * x
		rep.VCs = append(rep.VCs, *s)
	}
	rep.Jain = sx * sx / (float64(len(vcs)) * sx2)
}

// String is the report's one-line summary.
func (r QueueReport) String() string {
	return fmt.Sprintf("%-8s mean wait %8.0f s, mean JCT %8.0f s, utilisation %.3f, reclaims %d losing %.0f GPU-h (%.3f%% of %.0f GPU-h used; %.3f%% with the 30 s restart charge), Jain %.3f, %d rounds, wall %s",
		r.Mode, r.MeanWait, r.MeanJCT, r.Utilisation, r.Reclaims, r.LostGPUSec/3600, 100*r.LostGPUSec/math.Max(r.UsedGPUSec, 1),
		r.UsedGPUSec/3600, 100*r.LostWithRestart/math.Max(r.UsedGPUSec, 1), r.Jain, r.Rounds, r.Wall.Round(time.Millisecond))
}

// Goals checks the goals on reports of every mode of one cluster
// (strict and reclaim at least) and says, one line each, whether they hold.
func Goals(reps map[QueueMode]QueueReport) []string {
	strict, ok1 := reps[ModeStrict]
	rc, ok2 := reps[ModeReclaim]
	if !ok1 || !ok2 {
		return []string{"goals need the strict and reclaim replays"}
	}
	verdict := func(ok bool) string {
		if ok {
			return "MET"
		}
		return "NOT MET"
	}
	var out []string
	out = append(out, fmt.Sprintf("mean wait, reclaim vs strict: %.0f s vs %.0f s (%.2fx; goal <= 0.5x): %s",
		rc.MeanWait, strict.MeanWait, rc.MeanWait/strict.MeanWait, verdict(rc.MeanWait <= 0.5*strict.MeanWait)))
	var worse []string
	for i, v := range rc.VCs {
		s := strict.VCs[i]
		big := v.GPUShare >= 0.001
		bad := v.MeanWait > 1.05*s.MeanWait && v.MeanWait-s.MeanWait > 0
		if bad {
			tag := ""
			if !big {
				tag = " (under 0.1% of GPU time)"
			}
			worse = append(worse, fmt.Sprintf("%s %.0f s vs %.0f s%s", v.VC, v.MeanWait, s.MeanWait, tag))
		}
	}
	bigWorse := 0
	for _, w := range worse {
		if !strings.Contains(w, "under 0.1%") {
			bigWorse++
		}
	}
	out = append(out, fmt.Sprintf("no VC with >= 0.1%% of GPU time waits > 5%% longer than under strict: %s; worse: %s",
		verdict(bigWorse == 0), strings.Join(append(worse, "none")[:max(len(worse), 1)], "; ")))
	lost := rc.LostGPUSec / math.Max(rc.UsedGPUSec, 1)
	out = append(out, fmt.Sprintf("GPU time lost to reclaims %.3f%% of GPU time used (goal < 2%%): %s", 100*lost, verdict(lost < 0.02)))
	return out
}
