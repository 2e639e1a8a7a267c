package demo

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// summary prints what ran where, the checkpoints and the JCTs.
func (d *Demo) summary(res *Result) {
	d.step("Summary")
	w := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "    job\twhere\twhat happened")
	for _, name := range []string{"share-a", "share-b"} {
		if p, ok := res.Sharing.Jobs[name]; ok {
			fmt.Fprintf(w, "    %s\t%s GPU %s\t2 of 4 shares %s\n", name, p.Node, short(p.GPU), shareIndexes(p.Shares))
		}
	}
	t := res.Training
	fmt.Fprintf(w, "    %s\t%s\tsuspended at step %d, resumed at %d, migrated at %d, finished at %d in %s\n",
		trainJob, strings.Join(t.Nodes, " -> "), t.SuspendedAt, t.ResumedAt, t.MigratedAt, t.FinalStep, t.JCT.Round(time.Second))
	if ct := res.Container; len(ct.Allocs) > 0 {
		fmt.Fprintf(w, "    %s\t%s (docker)\tsuspended at step %d, resumed at %d, finished at %d\n",
			containerJob, containerNode, ct.SuspendedAt, ct.ResumedAt, ct.FinalStep)
	}
	for _, job := range ElasticJobs {
		if o, ok := res.Planner.Jobs[job]; ok {
			fmt.Fprintf(w, "    %s\tplanner-managed\tworkers over time %v, %d planner decision(s), finished at %d in %s\n",
				job, o.Workers, len(res.Planner.Decisions[job]), o.FinalStep, o.JCT.Round(time.Second))
		}
	}
	w.Flush()
	d.speedSummary(res.Planner)
	saved, restored := len(t.Saved), len(t.Restored)
	if res.Container.Saved != "" {
		saved++
	}
	if res.Container.Restored != "" {
		restored++
	}
	fmt.Fprintf(d.out, "\n    checkpoints saved:    %d\n", saved)
	fmt.Fprintf(d.out, "    checkpoints restored: %d\n", restored)
	fmt.Fprintf(d.out, "    final parameters identical to an uninterrupted run: %t\n", t.Identical)
	if len(res.Container.Allocs) > 0 {
		fmt.Fprintf(d.out, "    container job's final parameters identical to an uninterrupted run: %t\n", res.Container.Identical)
	}
	if len(res.Planner.Jobs) > 0 {
		fmt.Fprintf(d.out, "    elastic jobs' final parameters identical to an uninterrupted single-process run: %t\n", res.Planner.Identical)
	}
	fmt.Fprintf(d.out, "    demo took %s\n", time.Since(d.start).Round(time.Second))
	if d.cfg.Teardown {
		fmt.Fprintf(d.out, "\n    The cluster is stopped now (DEMO_TEARDOWN=1); `make demo` without it leaves the UIs up.\n")
		return
	}
	fmt.Fprintf(d.out, "\n    Nomad UI:  %s/ui/jobs\n", d.cfg.NomadAddr)
	fmt.Fprintf(d.out, "    Consul UI: http://%s/ui\n", d.cfg.ConsulAddr)
	if res.Planner.Instance != "" {
		fmt.Fprintf(d.out, "    Planner:   http://%s/ui  (GPUs and shares, jobs, fitted curves, the plan and its reasons)\n", res.Planner.Instance)
	}
}

func short(uuid string) string {
	if len(uuid) > 12 {
		return uuid[:12] + "…"
	}
	return uuid
}

// speedSummary prints the elastic jobs' median samples/s by worker count.
func (d *Demo) speedSummary(p PlannerResult) {
	if len(p.Speeds) == 0 {
		return
	}
	ws := make([]int, 0, len(p.Speeds))
	for w := range p.Speeds {
		ws = append(ws, w)
	}
	sort.Ints(ws)
	fmt.Fprintf(d.out, "\n    elastic training speed (compute MODELLED at %s/sample; median of the jobs' reports, 1 parameter server):\n", elasticCompute)
	base := p.Speeds[ws[0]] / float64(ws[0])
	for _, w := range ws {
		fmt.Fprintf(d.out, "      %d worker(s): %6.0f samples/s  (%.2fx one worker)\n", w, p.Speeds[w], p.Speeds[w]/base)
	}
}
