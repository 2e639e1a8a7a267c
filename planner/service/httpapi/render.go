package httpapi

import (
	"encoding/json"
	"fmt"

	"github.com/caravan-nomad/caravan/planner/service/manager"
)

// Each job, plan and action is rendered on its own, so one that cannot be
// encoded (a NaN or Inf that slipped into a model) shows as an error in its
// own place and never turns the whole response into a 500.

// brokenJob stands in for a job view that could not be encoded.
type brokenJob struct {
	Namespace   string        `json:"namespace"`
	ID          string        `json:"id"`
	State       manager.State `json:"state"`
	RenderError string        `json:"render_error"`
}

func renderJobs(jobs []manager.JobView) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, renderJob(j))
	}
	return out
}

func renderJob(j manager.JobView) json.RawMessage {
	b, err := json.Marshal(j)
	if err == nil {
		return b
	}
	b, _ = json.Marshal(brokenJob{Namespace: j.Namespace, ID: j.ID, State: j.State,
		RenderError: fmt.Sprintf("this job's view cannot be rendered: %v", err)})
	return b
}

// renderOr encodes v, or an object with the error.
func renderOr(v any, what string) json.RawMessage {
	b, err := json.Marshal(v)
	if err == nil {
		return b
	}
	b, _ = json.Marshal(errorBody{Error: fmt.Sprintf("%s cannot be rendered: %v", what, err)})
	return b
}

// roundView is a Round with its parts rendered one by one (the outer
// fields override the embedded Round's).
type roundView struct {
	*manager.Round
	Jobs    []json.RawMessage `json:"jobs"`
	Plan    json.RawMessage   `json:"plan,omitempty"`
	Actions []json.RawMessage `json:"actions"`
}

func renderRound(r *manager.Round) roundView {
	v := roundView{Round: r, Jobs: renderJobs(r.Jobs), Actions: make([]json.RawMessage, 0, len(r.Actions))}
	if r.Plan != nil {
		v.Plan = renderOr(r.Plan, "the plan")
	}
	for _, a := range r.Actions {
		v.Actions = append(v.Actions, renderOr(a, "action on "+a.Job))
	}
	return v
}
