package demo

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/caravan-nomad/caravan/internal/jobtime"
)

const elasticPSTask = "ps"

// ElasticOutcome is how one elastic job ended.
type ElasticOutcome struct {
	// JCT is first submission to the last task's end, from Nomad's records.
	JCT time.Duration
	// FinalStep and ParamsHash are from the coordinator's last line.
	FinalStep  uint64
	ParamsHash string
	// Workers are the worker counts it ran with, in the order reported.
	Workers []int
	// Decisions is how many scaling events the planner wrote on it.
	Decisions int
}

var (
	// The coordinator's progress line: trainer/README.md.
	elasticStepLine = regexp.MustCompile(`(?m)^step=\d+ loss=\S+ samples_per_sec=([0-9.]+) workers=(\d+) ps=(\d+)`)
)

// finishElastic waits for the elastic jobs to complete, collects their
// speeds and final parameters, and compares those with an uninterrupted
// single-process run of the same training.
func (d *Demo) finishElastic(ctx context.Context, res *PlannerResult) error {
	speeds := map[int][]float64{}
	for _, job := range ElasticJobs {
		out, err := d.waitElastic(ctx, job, speeds)
		if err != nil {
			return err
		}
		res.Jobs[job] = out
	}
	res.Speeds = medians(speeds)
	ref, err := d.referenceHash(ctx, d.cfg.ElasticSteps)
	if err != nil {
		return err
	}
	res.ReferenceHash, res.Identical = ref, true
	for _, job := range ElasticJobs {
		res.Identical = res.Identical && res.Jobs[job].ParamsHash == ref
	}
	for _, job := range ElasticJobs {
		res.Decisions[job], _ = d.plannerEvents(job)
	}
	d.say("an uninterrupted single-process run ends with sha256 %s…: every elastic job identical = %t", ref[:min(16, len(ref))], res.Identical)
	return nil
}

// waitElastic waits for one elastic job to finish and reads its
// coordinator's logs, adding its reported speeds to speeds.
func (d *Demo) waitElastic(ctx context.Context, job string, speeds map[int][]float64) (ElasticOutcome, error) {
	var out ElasticOutcome
	err := d.c.Wait(ctx, job+" to finish", 8*time.Minute, func() (bool, error) {
		j, _, err := d.c.Nomad.Jobs().Info(job, nil)
		return err == nil && j.Status != nil && *j.Status == "dead", err
	})
	if err != nil {
		return out, err
	}
	if out.JCT, err = d.jct(job); err != nil {
		return out, err
	}
	as, err := d.c.Allocs(ctx, job)
	if err != nil {
		return out, err
	}
	slices.Reverse(as) // oldest first
	for _, a := range as {
		if a.TaskGroup != "ps" {
			continue
		}
		log, err := d.c.Logs(ctx, a.ID, elasticPSTask, false)
		if err != nil {
			continue // a shard server's allocation may have been collected
		}
		out.addLog(log, speeds)
	}
	if out.ParamsHash == "" {
		return out, fmt.Errorf("%s: no coordinator log has a final line", job)
	}
	d.say("%s finished: step %d in %s, workers over time %v", job, out.FinalStep, out.JCT.Round(time.Second), out.Workers)
	return out, nil
}

// addLog reads a parameter server's log: speeds by worker count (one
// parameter server only, so the figures compare), the worker counts over
// time and the final line.
func (o *ElasticOutcome) addLog(log string, speeds map[int][]float64) {
	for _, m := range elasticStepLine.FindAllStringSubmatch(log, -1) {
		sps, _ := strconv.ParseFloat(m[1], 64)
		w, _ := strconv.Atoi(m[2])
		if n := len(o.Workers); n == 0 || o.Workers[n-1] != w {
			o.Workers = append(o.Workers, w)
		}
		if m[3] == "1" && w > 0 {
			speeds[w] = append(speeds[w], sps)
		}
	}
	if m := finalLine.FindStringSubmatch(log); m != nil {
		o.FinalStep, _ = strconv.ParseUint(m[1], 10, 64)
		o.ParamsHash = m[2]
	}
}

// jct is a finished job's completion time as Nomad recorded it: from its
// first submission to its last task's end. Not the job's SubmitTime, which
// every planner scale moves (internal/jobtime).
func (d *Demo) jct(job string) (time.Duration, error) {
	rec, err := jobtime.Read(d.c.Nomad, job, nil)
	if err != nil {
		return 0, err
	}
	jct := rec.JCT()
	if jct == 0 {
		return 0, fmt.Errorf("%s: Nomad holds no submission or end time", job)
	}
	return jct, nil
}

// referenceHash runs the same training in one process, uninterrupted.
func (d *Demo) referenceHash(ctx context.Context, steps int) (string, error) {
	ref, err := exec.CommandContext(ctx, d.cfg.CaravanBin, "trainer", "-steps", strconv.Itoa(steps), "-log-every", "0").Output()
	if err != nil {
		return "", fmt.Errorf("uninterrupted reference run: %w", err)
	}
	m := finalLine.FindSubmatch(ref)
	if m == nil {
		return "", fmt.Errorf("uninterrupted reference run printed no final line")
	}
	return string(m[2]), nil
}

// medians returns the median of each list.
func medians(lists map[int][]float64) map[int]float64 {
	out := map[int]float64{}
	for k, v := range lists {
		v = slices.Clone(v)
		sort.Float64s(v)
		out[k] = v[len(v)/2]
	}
	return out
}
