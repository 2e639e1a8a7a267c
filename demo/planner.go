package demo

import (
	"context"
	"fmt"
	"strings"
	"time"
)

const (
	plannerJob     = "caravan-planner"
	plannerService = "caravan-planner"
	plannerMessage = "caravan planner:"
)

// PlannerResult is what the planner decided during the demo.
type PlannerResult struct {
	// Instance is the Consul address of the planner the demo found.
	Instance string
	// Decisions are the planner's scaling events, per job.
	Decisions map[string][]string
}

// planner runs the planner as a Nomad service job, finds it in Consul, then
// submits two planner-managed training jobs that contend for GPU shares and
// waits for the planner's scaling events on them.
func (d *Demo) planner(ctx context.Context) (PlannerResult, error) {
	res := PlannerResult{Decisions: map[string][]string{}}
	if err := d.submit(ctx, "jobspecs/planner.nomad.hcl", plannerJob,
		"caravan_bin="+d.cfg.CaravanBin, "nomad_addr="+d.cfg.NomadAddr, "consul_addr="+d.cfg.ConsulAddr,
		"count=1", "interval=5s", "cooldown=20s"); err != nil {
		return res, err
	}
	err := d.poll(ctx, "a healthy caravan-planner in Consul", 2*time.Minute, func() (bool, error) {
		entries, _, err := d.consul.Health().Service(plannerService, "", true, nil)
		if err != nil || len(entries) == 0 {
			return false, err
		}
		res.Instance = fmt.Sprintf("%s:%d", entries[0].Service.Address, entries[0].Service.Port)
		return true, nil
	})
	if err != nil {
		return res, err
	}
	d.say("Consul: service %s is healthy at http://%s (leader-elected, writes to Nomad)", plannerService, res.Instance)

	jobs := []string{"sim-a", "sim-b"}
	for _, name := range jobs {
		if err := d.submit(ctx, "jobspecs/planner-train-sim.nomad.hcl", name,
			"name="+name, "caravan_bin="+d.cfg.CaravanBin, "state_dir="+d.cfg.StateDir,
			"count=1", "max_workers=2", "shares=4"); err != nil {
			return res, err
		}
	}
	for _, name := range jobs {
		err := d.poll(ctx, "the planner's decision on "+name, 3*time.Minute, func() (bool, error) {
			evs, err := d.plannerEvents(name)
			if err != nil {
				return false, err
			}
			res.Decisions[name] = evs
			return len(evs) > 0, nil
		})
		if err != nil {
			return res, err
		}
		d.say("%s: %s", name, res.Decisions[name][len(res.Decisions[name])-1])
	}
	// Stop (without purging) so the scaling events stay in the UI.
	for _, name := range jobs {
		if _, _, err := d.nomad.Jobs().Deregister(name, false, nil); err != nil {
			return res, err
		}
	}
	return res, nil
}

// plannerEvents returns the planner's scaling events of a job, oldest first.
func (d *Demo) plannerEvents(job string) ([]string, error) {
	st, _, err := d.nomad.Jobs().ScaleStatus(job, nil)
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
