package ui

import (
	"context"
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/manager"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

var funcs = template.FuncMap{
	"dur":     fmtSeconds,
	"num":     fmtNum,
	"ago":     ago,
	"jobPath": JobPath,
	// jobHref links a "namespace/id" (a namespace holds no slash).
	"jobHref": func(key string) string {
		ns, id, _ := strings.Cut(key, "/")
		return JobPath(ns, id)
	},
	"pct": func(a, b int64) int64 {
		if b <= 0 {
			return 0
		}
		return a * 100 / b
	},
	"lower": strings.ToLower,
	// opt prints a measured number that may be absent ("–" then).
	"opt": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return fmtNum(*v)
	},
}

// fmtSeconds prints a duration in seconds compactly; negative means never.
func fmtSeconds(s float64) string {
	switch {
	case math.IsNaN(s):
		return "unknown"
	case s < 0 || math.IsInf(s, 1):
		return "never"
	}
	return (time.Duration(s) * time.Second).Round(time.Second).String()
}

func fmtNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	a := math.Abs(v)
	switch {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a == 0:
		return "0"
	}
	return fmt.Sprintf("%.3g", v)
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}

// jobRow is one line of the jobs page.
type jobRow struct {
	manager.JobView
	Remaining float64 // predicted seconds with the current workers; -1 never, NaN unknown
	Resizes   int     // planner changes applied (each restarts the job from its checkpoint)
}

type jobsData struct {
	Round *manager.Round
	Jobs  []jobRow
}

func (s *Server) jobsData(r *manager.Round) jobsData {
	d := jobsData{Round: r}
	if r == nil {
		return d
	}
	for _, j := range r.Jobs {
		d.Jobs = append(d.Jobs, jobRow{JobView: j, Remaining: remainingNow(j), Resizes: applied(s.Planner.History(j.Namespace, j.ID))})
	}
	return d
}

func applied(h []manager.Decision) int {
	n := 0
	for _, d := range h {
		if d.Verdict == manager.VerdictApplied {
			n++
		}
	}
	return n
}

// remainingNow is the predicted remaining time at the planned (else
// current) worker count; 0 once the job finished.
func remainingNow(j manager.JobView) float64 {
	if j.Fit.Finished {
		return 0
	}
	if j.Plan != nil && j.Plan.PredictedRemaining != 0 {
		return j.Plan.PredictedRemaining
	}
	if p, ok := j.Predicted[j.Workers]; ok {
		return p
	}
	return math.NaN()
}

// option is one worker count the planner could give a job.
type option struct {
	Workers   int
	Remaining float64
	// Gain is the seconds of remaining time this worker saves over one
	// fewer: the marginal gain the greedy allocator ranks.
	Gain             float64
	HasGain          bool
	Current, Planned bool
}

// timelineRow is one entry of a job's timeline: a planner decision seen by
// this instance, or a Nomad scaling event.
type timelineRow struct {
	Time    time.Time
	Source  string // planner or nomad
	Change  string
	Gain    float64
	HasGain bool
	Verdict manager.Verdict
	Text    string
	Error   bool
}

type jobData struct {
	Round *manager.Round
	// OptionsNote says why the options table is empty: the job finished,
	// or what is missing for a prediction.
	OptionsNote string
	Job         manager.JobView
	Loss        template.HTML
	Speed       template.HTML
	Workers     template.HTML
	Options     []option
	Timeline    []timelineRow
	EventsErr   string
	Candidate   *manager.Candidate
}

func (s *Server) jobData(ctx context.Context, r *manager.Round, j manager.JobView) jobData {
	d := jobData{Round: r, Job: j}
	d.Loss = lossChart(j, s.Progress.Records(ingest.JobKey{Namespace: j.Namespace, ID: j.ID}))
	d.Speed = speedChart(j)
	d.Options = options(j)
	d.OptionsNote = optionsNote(j)
	for i := range r.Candidates {
		if r.Candidates[i].Job == j.Namespace+"/"+j.ID {
			d.Candidate = &r.Candidates[i]
		}
	}
	for _, h := range s.Planner.History(j.Namespace, j.ID) {
		d.Timeline = append(d.Timeline, timelineRow{Time: h.Time, Source: "planner", Change: change(h.From, h.To, h.PSFrom, h.PSTo),
			Gain: h.Gain, HasGain: true, Verdict: h.Verdict, Text: string(h.Kind) + ": " + h.Reason})
	}
	if s.Cluster != nil {
		st, err := s.Cluster.ScaleEvents(ctx, j.Namespace, j.ID)
		if err != nil {
			d.EventsErr = err.Error()
		} else if st != nil {
			for group, tg := range st.TaskGroups {
				if group == j.Group {
					d.Workers = workersChart(tg.Events)
				}
				for _, e := range tg.Events {
					row := timelineRow{Time: time.Unix(0, int64(e.Time)), Source: "nomad: " + group, Text: e.Message, Error: e.Error}
					if e.Count != nil {
						row.Change = fmt.Sprintf("%d → %d", e.PreviousCount, *e.Count)
					} else if n, ok := submit.EventCount(&e); ok {
						// Counted by a registration: the event carries the new count only.
						row.Change = fmt.Sprintf("→ %d", n)
					}
					d.Timeline = append(d.Timeline, row)
				}
			}
		}
	}
	sort.SliceStable(d.Timeline, func(a, b int) bool { return d.Timeline[a].Time.After(d.Timeline[b].Time) })
	if len(d.Timeline) > 60 {
		d.Timeline = d.Timeline[:60]
	}
	return d
}

func change(from, to, psFrom, psTo int) string {
	s := fmt.Sprintf("%d → %d workers", from, to)
	if psFrom != psTo {
		s += fmt.Sprintf(", %d → %d servers", psFrom, psTo)
	}
	return s
}

func options(j manager.JobView) []option {
	if j.Fit.Finished {
		return nil // nothing remains: optionsNote says so
	}
	ws := make([]int, 0, len(j.Predicted))
	for w := range j.Predicted {
		ws = append(ws, w)
	}
	sort.Ints(ws)
	planned := -1
	if j.Plan != nil {
		planned = j.Plan.Workers
	}
	var out []option
	for _, w := range ws {
		o := option{Workers: w, Remaining: j.Predicted[w], Current: w == j.Workers, Planned: w == planned}
		if p, ok := j.Predicted[w-1]; ok && p >= 0 && o.Remaining >= 0 {
			o.Gain, o.HasGain = p-o.Remaining, true
		}
		out = append(out, o)
	}
	return out
}

// optionsNote says why a job has no predicted remaining time per worker
// count: it finished, or which input is missing (never "no speed measured"
// when a speed was).
func optionsNote(j manager.JobView) string {
	switch {
	case j.Fit.Finished:
		return fmt.Sprintf("Training finished at step %d: no remaining time to predict.", j.Fit.Step)
	case len(j.Fit.SpeedSamples) == 0:
		return "No prediction yet: no speed measured."
	case j.Fit.RemainingSteps < 0:
		return fmt.Sprintf("No prediction yet: speed measured at %s, but no remaining-steps estimate.", measuredAt(j.Fit))
	}
	return fmt.Sprintf("No prediction: speed measured at %s, remaining steps %s.", measuredAt(j.Fit), fmtNum(j.Fit.RemainingSteps))
}

// measuredAt lists the worker counts a job's speed was measured at.
func measuredAt(f manager.Fit) string {
	seen := map[int]bool{}
	var ws []string
	for _, s := range f.SpeedSamples {
		if !seen[s.Workers] {
			seen[s.Workers] = true
			ws = append(ws, fmt.Sprint(s.Workers))
		}
	}
	return strings.Join(ws, ", ") + " worker(s)"
}

type planData struct {
	Round      *manager.Round
	Candidates []manager.Candidate
}

func newPlanData(r *manager.Round) planData {
	d := planData{Round: r}
	if r != nil {
		d.Candidates = append(d.Candidates, r.Candidates...)
		sort.SliceStable(d.Candidates, func(a, b int) bool { return d.Candidates[a].Gain > d.Candidates[b].Gain })
	}
	return d
}

type clusterData struct {
	ClusterView
	Managed map[string]bool // namespace/id of the planner's jobs
	Shares  int
	Held    int
}

func newClusterData(v ClusterView, r *manager.Round) clusterData {
	d := clusterData{ClusterView: v, Managed: map[string]bool{}}
	if r != nil {
		for _, j := range r.Jobs {
			d.Managed[j.Namespace+"/"+j.ID] = true
		}
	}
	for _, g := range v.GPUs {
		d.Shares += len(g.Shares)
		d.Held += g.Used()
	}
	return d
}
