package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/caravan-nomad/caravan/planner/policy"
)

const (
	plannerMessage = "caravan planner:"

	elasticSpec   = "jobspecs/train-elastic.nomad.hcl"
	elasticWorker = "worker"
	// elasticShares is a whole simulated GPU per worker, so the local
	// cluster's 4 GPUs hold 4 workers in all and the jobs contend for them.
	elasticShares = 4
	elasticGPUs   = 4
	// elasticCompute is the MODELLED GPU time per sample of the demo's
	// distributed trainer (a sleep in each worker; trainer/README.md).
	elasticCompute = "1ms"
)

// ElasticJobs are the demo's planner-managed training jobs: the first two
// contend for the GPUs from the start, the third arrives once they fill
// them.
var ElasticJobs = []string{"elastic-a", "elastic-b", "elastic-c"}

// PlannerResult is what the planner decided during the demo, and what the
// elastic jobs made of it.
type PlannerResult struct {
	// Instance is the Consul address of the planner, looked up again each
	// time the demo prints it.
	Instance string
	// Decisions are the planner's scaling events, per job, oldest first.
	Decisions map[string][]string
	// Grew is, per job of the first two, its first decision that gave it
	// more workers ("job: message; job: message"); MadeRoom the decision
	// that took workers from a running job after the third arrived.
	Grew, MadeRoom string
	// Jobs are the elastic jobs' outcomes, by job ID.
	Jobs map[string]ElasticOutcome
	// Speeds are the median samples/s the jobs reported, by worker count
	// (one parameter server).
	Speeds map[int]float64
	// ReferenceHash is the parameters' hash of an uninterrupted
	// single-process run of the same training; Identical whether every
	// elastic job ended with it.
	ReferenceHash string
	Identical     bool
}

// planner runs the planner as a Nomad service job, finds it in Consul, then
// runs the elastic-training story: two distributed jobs share the idle GPUs,
// the planner grows them, a third arrives and the planner makes room for it
// by shrinking the others; all three finish bit for bit.
func (d *Demo) planner(ctx context.Context) (PlannerResult, error) {
	res := PlannerResult{Decisions: map[string][]string{}, Jobs: map[string]ElasticOutcome{}}
	var err error
	if res.Instance, err = d.startPlanner(ctx); err != nil {
		return res, err
	}
	d.say("compute is MODELLED: each worker sleeps %s per sample for a GPU's time; the gradient exchange over TCP is real", elasticCompute)
	first, late := ElasticJobs[:2], ElasticJobs[2]
	for _, name := range first {
		if err := d.submitElastic(ctx, name); err != nil {
			return res, err
		}
	}
	if res.Grew, err = d.waitGrown(ctx, first); err != nil {
		return res, err
	}
	d.say("the planner grew them: %s", res.Grew)
	before, err := d.workerCounts(first)
	if err != nil {
		return res, err
	}
	if err := d.submitElastic(ctx, late); err != nil {
		return res, err
	}
	if res.MadeRoom, err = d.waitRoomMade(ctx, first, before, late); err != nil {
		return res, err
	}
	d.say("a third job arrived and the planner made room: %s", res.MadeRoom)
	if res.Instance, err = d.c.PlannerAddr(ctx); err != nil {
		return res, err
	}
	d.say("the planner's web page: http://%s/ui (who holds which GPU share, the fitted curves, why each decision)", res.Instance)
	if d.cfg.WhilePlanning != nil {
		if err := d.cfg.WhilePlanning(ctx, res.Instance); err != nil {
			return res, err
		}
	}
	return res, d.finishElastic(ctx, &res)
}

// StoryPolicy is the policy the demo's planner story (grow the two jobs
// onto the idle GPUs, then shrink them for a third) runs and was validated
// with; it is set explicitly, so the story does not change with the
// service's default policy (policy.Best).
const StoryPolicy = "optimus"

// startPlanner submits the planner job and returns its address in Consul.
func (d *Demo) startPlanner(ctx context.Context) (string, error) {
	d.say("the planner runs policy %s for this story (the service's default is %s; README.md says why)", StoryPolicy, policy.Best)
	return d.c.StartPlanner(ctx, "policy="+StoryPolicy, "count=1", "interval=5s", "cooldown=15s")
}

func (d *Demo) submitElastic(ctx context.Context, name string) error {
	_, err := d.c.Submit(ctx, elasticSpec, "name="+name, "caravan_bin="+d.cfg.CaravanBin,
		"workers=1", "ps=1", fmt.Sprintf("shares=%d", elasticShares),
		fmt.Sprintf("steps=%d", d.cfg.ElasticSteps), "compute_per_sample="+elasticCompute)
	return err
}

// waitGrown waits until the planner has given the jobs every idle GPU, and
// returns, per job, its first decision that added workers.
func (d *Demo) waitGrown(ctx context.Context, jobs []string) (string, error) {
	var grew string
	err := d.c.Wait(ctx, "the planner to give the idle GPUs to "+strings.Join(jobs, " and "), 4*time.Minute, func() (bool, error) {
		counts, err := d.workerCounts(jobs)
		if err != nil {
			return false, err
		}
		total := 0
		for _, n := range counts {
			total += n
		}
		var grown bool
		grew, grown = d.growthPerJob(jobs, counts)
		return grown && total >= elasticGPUs, nil
	})
	return grew, err
}

// growthPerJob is, for each job, "job: " and its first planner decision that
// added workers, or its worker count when it had none; grown is whether a
// job had one.
func (d *Demo) growthPerJob(jobs []string, counts map[string]int) (line string, grown bool) {
	parts := make([]string, 0, len(jobs))
	for _, job := range jobs {
		dec := d.firstDecision([]string{job}, func(from, to int) bool { return to > from })
		if dec == "" {
			dec = fmt.Sprintf("%s: not grown, %d worker(s)", job, counts[job])
		} else {
			grown = true
		}
		parts = append(parts, dec)
	}
	return strings.Join(parts, "; "), grown
}

// waitRoomMade waits until a job of jobs has fewer workers than before and
// the newcomer's worker runs, and returns the decision that shrank it.
func (d *Demo) waitRoomMade(ctx context.Context, jobs []string, before map[string]int, newcomer string) (string, error) {
	var made string
	err := d.c.Wait(ctx, "the planner to make room for "+newcomer, 4*time.Minute, func() (bool, error) {
		counts, err := d.workerCounts(jobs)
		if err != nil {
			return false, err
		}
		shrunk := false
		for job, n := range counts {
			shrunk = shrunk || n < before[job]
		}
		if shrunk && made == "" {
			made = d.lastDecision(jobs, func(from, to int) bool { return to < from })
		}
		running, err := d.waitRunningNow(ctx, newcomer, elasticWorker)
		return shrunk && running, err
	})
	return made, err
}

// workerCounts returns each job's worker group count in its spec.
func (d *Demo) workerCounts(jobs []string) (map[string]int, error) {
	out := map[string]int{}
	for _, job := range jobs {
		j, _, err := d.c.Nomad.Jobs().Info(job, nil)
		if err != nil {
			return nil, err
		}
		for _, tg := range j.TaskGroups {
			if tg.Name != nil && *tg.Name == elasticWorker && tg.Count != nil {
				out[job] = *tg.Count
			}
		}
	}
	return out, nil
}

// waitRunningNow reports whether a group of job has a running allocation.
func (d *Demo) waitRunningNow(ctx context.Context, job, group string) (bool, error) {
	as, err := d.c.Allocs(ctx, job)
	if err != nil {
		return false, err
	}
	for _, a := range as {
		if a.TaskGroup == group && a.ClientStatus == "running" {
			return true, nil
		}
	}
	return false, nil
}

// plannerEvents returns the planner's scaling events of a job, oldest first.
func (d *Demo) plannerEvents(job string) ([]string, error) {
	st, _, err := d.c.Nomad.Jobs().ScaleStatus(job, nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, tg := range st.TaskGroups {
		for i := len(tg.Events) - 1; i >= 0; i-- {
			if ev := tg.Events[i]; strings.HasPrefix(ev.Message, plannerMessage) {
				out = append(out, ev.Message)
			}
		}
	}
	return out, nil
}

// firstDecision and lastDecision return "job: message" of the first (last)
// planner worker-count decision on jobs for which keep(from, to) holds.
func (d *Demo) firstDecision(jobs []string, keep func(from, to int) bool) string {
	return d.findDecision(jobs, keep, false)
}

func (d *Demo) lastDecision(jobs []string, keep func(from, to int) bool) string {
	return d.findDecision(jobs, keep, true)
}

func (d *Demo) findDecision(jobs []string, keep func(from, to int) bool, last bool) string {
	found := ""
	for _, job := range jobs {
		evs, err := d.plannerEvents(job)
		if err != nil {
			continue
		}
		for _, ev := range evs {
			if from, to, ok := workerChange(ev); ok && keep(from, to) {
				found = job + ": " + strings.TrimSpace(strings.TrimPrefix(ev, plannerMessage))
				if !last {
					return found
				}
			}
		}
	}
	return found
}

// workerChange parses the worker counts of a planner scaling event
// ("caravan planner: scale 1 -> 2, ..." or "... scale workers 2 -> 1, ...").
func workerChange(msg string) (from, to int, ok bool) {
	rest := strings.TrimSpace(strings.TrimPrefix(msg, plannerMessage))
	rest = strings.TrimPrefix(rest, "scale ")
	rest = strings.TrimPrefix(rest, "workers ")
	if _, err := fmt.Sscanf(rest, "%d -> %d", &from, &to); err != nil {
		return 0, 0, false
	}
	return from, to, true
}
