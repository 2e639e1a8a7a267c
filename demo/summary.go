package demo

import (
	"fmt"
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
	for _, job := range []string{"sim-a", "sim-b"} {
		if evs := res.Planner.Decisions[job]; len(evs) > 0 {
			fmt.Fprintf(w, "    %s\tplanner-managed\t%d planner decision(s); last: %s\n", job, len(evs), evs[len(evs)-1])
		}
	}
	w.Flush()
	fmt.Fprintf(d.out, "\n    checkpoints saved:    %d\n", len(t.Saved))
	fmt.Fprintf(d.out, "    checkpoints restored: %d\n", len(t.Restored))
	fmt.Fprintf(d.out, "    final parameters identical to an uninterrupted run: %t\n", t.Identical)
	fmt.Fprintf(d.out, "    demo took %s\n", time.Since(d.start).Round(time.Second))
	fmt.Fprintf(d.out, "\n    Nomad UI:  %s/ui/jobs\n", d.cfg.NomadAddr)
	fmt.Fprintf(d.out, "    Consul UI: http://%s/ui\n", d.cfg.ConsulAddr)
}

func short(uuid string) string {
	if len(uuid) > 12 {
		return uuid[:12] + "…"
	}
	return uuid
}
