package manager

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/caravan-nomad/caravan/planner/service/source"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

// Kind is what an action does.
type Kind string

const (
	KindScale     Kind = "scale"   // resize a running job
	KindStart     Kind = "start"   // first workers of a queued job
	KindSuspend   Kind = "suspend" // scale to 0 under overload (time-slicing)
	KindResume    Kind = "resume"  // scale a suspended job back up
	KindStop      Kind = "stop"    // stop a converged job
	KindUserError Kind = "user-error-stop"
	KindFinish    Kind = "finish" // stop a finished job whose stray workers still run
	// KindGangRollback scales a gang Nomad left partly placed back to 0.
	KindGangRollback Kind = "gang-rollback"
	// KindResize changes the GPU shares per worker (right-sizing applied,
	// or a regrowth after running out of GPU memory) at the same worker
	// count; an action of another kind may carry a resize too (Resize).
	KindResize Kind = "resize"
)

// Action is one change the planner wants to make to one job.
type Action struct {
	Job   string `json:"job"` // namespace/id
	Kind  Kind   `json:"kind"`
	Group string `json:"group,omitempty"`
	From  int    `json:"from"`
	To    int    `json:"to"`
	// PSGroup, PSFrom and PSTo describe a parameter-server change, if any.
	PSGroup string `json:"ps_group,omitempty"`
	PSFrom  int    `json:"ps_from,omitempty"`
	PSTo    int    `json:"ps_to,omitempty"`
	// Nodes, with placement affinity on, are the nodes the policy placed
	// the job on.
	Nodes []string `json:"nodes,omitempty"`
	Gain  float64  `json:"gain"`
	// Unmeasured is true when the job had no fitted speed model yet: the
	// policy then assumed linear scaling and Gain is in relative units,
	// not seconds.
	Unmeasured bool    `json:"unmeasured,omitempty"`
	Saving     float64 `json:"saving_seconds,omitempty"`
	Reason     string  `json:"reason"`
	Message    string  `json:"message"`
	// ReclaimedBy names the team queue (or queues, comma-separated) that
	// this suspend or shrink gives its GPUs back to: a reclaim of
	// borrowed GPUs. It is in the scaling event's meta and, when the
	// change is a registration, in the new job version's meta
	// (submit.MetaReclaimedBy).
	ReclaimedBy string `json:"reclaimed_by,omitempty"`
	// RoomFor names the jobs (comma-separated) that grow in the same round
	// as this shrink or suspension, which is not a reclaim: the GPUs it
	// frees go to them.
	RoomFor string `json:"room_for,omitempty"`
	// Status: planned (dry-run or follower), applied, deferred (rate
	// limit), conflict (the job changed: decided again next round), failed.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	EvalID string `json:"eval_id,omitempty"`

	key            source.JobKey
	jobModifyIndex uint64
	job            *source.Job // the version the decision was made on
	verdict        Verdict     // set by apply when the status alone does not say why
	// Resize, when set, changes the shares per worker in the same
	// registration.
	Resize *Resize `json:"resize,omitempty"`
	// Unpack, when set, moves the job off a shared GPU (packing.go).
	Unpack *Unpack `json:"unpack,omitempty"`
}

// registers reports whether write applies a as one registration: workers
// and parameter servers change together, neither to or from zero.
func (a *Action) registers() bool {
	return a.PSGroup != "" && a.From != a.To && a.PSFrom != a.PSTo && a.From > 0 && a.To > 0
}

// scaledGroups are the groups whose counts write scales, workers first,
// when a is not applied as one registration.
func (a *Action) scaledGroups() []string {
	var groups []string
	if a.From != a.To {
		groups = append(groups, a.Group)
	}
	if a.PSGroup != "" && a.PSFrom != a.PSTo {
		groups = append(groups, a.PSGroup)
	}
	return groups
}

// change is the decision a as the writes that apply it to job take it.
func (a *Action) change(policyName string, job *source.Job) submit.Change {
	counts := map[string]int{a.Group: a.To}
	if a.PSGroup != "" {
		counts[a.PSGroup] = a.PSTo
	}
	return submit.Change{
		Namespace: a.key.Namespace, JobID: a.key.ID,
		Job: job.Job, JobModifyIndex: a.jobModifyIndex,
		Counts: counts, Group: a.Group, Nodes: a.Nodes,
		Message: a.Message, Meta: a.eventMeta(policyName),
	}
}

func (a Action) priority() int {
	switch a.Kind {
	case KindStop, KindUserError, KindFinish:
		return 0
	case KindSuspend, KindGangRollback:
		return 1
	}
	if a.To < a.From || (a.Resize != nil && a.Resize.To < a.Resize.From && a.To == a.From) {
		return 2 // shrinks free capacity before anything grows
	}
	return 3
}

// order sorts actions: stops, then suspends and shrinks (they free
// capacity), then growth by gain (largest first).
func order(actions []Action) {
	sort.SliceStable(actions, func(i, j int) bool {
		pi, pj := actions[i].priority(), actions[j].priority()
		if pi != pj {
			return pi < pj
		}
		if actions[i].Gain != actions[j].Gain {
			return actions[i].Gain > actions[j].Gain
		}
		return actions[i].Job < actions[j].Job
	})
}

func (a Action) eventMeta(policyName string) map[string]any {
	action := submit.ActionScale
	switch a.Kind {
	case KindSuspend:
		action = submit.ActionSuspend
	case KindGangRollback:
		action = submit.ActionGangRollback
	case KindResume:
		action = submit.ActionResume
	case KindUserError:
		action = submit.ActionUserError
	case KindStop, KindFinish:
		action = submit.ActionConverged
	case KindResize:
		action = submit.ActionResize
	}
	m := map[string]any{submit.EventMetaAction: action, submit.EventMetaPolicy: policyName}
	if a.ReclaimedBy != "" {
		m[submit.MetaReclaimedBy] = a.ReclaimedBy
	}
	if a.Gain != 0 && !math.IsInf(a.Gain, 0) && !math.IsNaN(a.Gain) {
		m[submit.EventMetaGain] = fmt.Sprintf("%.4g", a.Gain)
	}
	return m
}

// scaleMessage is the text of the Nomad scaling event: a growth names the
// marginal gain that bought it; a shrink names its cause (the queue that
// reclaims, or the jobs it makes room for), never a gain, since the gain
// that matters is the other job's.
func scaleMessage(a Action) string {
	if a.Resize != nil {
		return resizeMessage(a)
	}
	if a.Unpack != nil {
		return unpackMessage(a)
	}
	switch a.Kind {
	case KindSuspend:
		if a.ReclaimedBy != "" {
			return fmt.Sprintf("caravan planner: suspend %d -> 0 (reclaimed by queue %s; the driver checkpoints on stop): %s", a.From, a.ReclaimedBy, a.Reason)
		}
		if a.RoomFor != "" {
			return fmt.Sprintf("caravan planner: suspend %d -> 0 to make room for %s (the driver checkpoints on stop)", a.From, a.RoomFor)
		}
		return fmt.Sprintf("caravan planner: suspend %d -> 0 (time-slicing under overload): %s", a.From, a.Reason)
	case KindResume:
		return fmt.Sprintf("caravan planner: resume 0 -> %d, marginal gain %.3g s per unit share: %s", a.To, a.Gain, a.Reason)
	case KindGangRollback:
		return fmt.Sprintf("caravan planner: gang rolled back %d -> 0 (Nomad placed only part of it): %s", a.From, a.Reason)
	case KindUserError:
		return fmt.Sprintf("caravan planner: stopped after repeated user errors: %s", a.Reason)
	case KindFinish:
		return fmt.Sprintf("caravan planner: job stopped, training finished: %s", a.Reason)
	}
	if a.To < a.From {
		return shrinkMessage(a)
	}
	gain := fmt.Sprintf("marginal gain %.3g s per unit share", a.Gain)
	if a.Unmeasured {
		gain = "marginal gain unknown (speed not measured yet, so linear scaling is assumed)"
	}
	msg := fmt.Sprintf("caravan planner: %s %s, %s", a.Kind, a.counts(), gain)
	if a.Saving > 0 && !math.IsInf(a.Saving, 0) {
		msg += fmt.Sprintf(", predicted %.0f s sooner", a.Saving)
	}
	// The policy's reason starts with its own "marginal gain:" label; the
	// message has named the gain already.
	return msg + ": " + strings.TrimPrefix(a.Reason, "marginal gain: ")
}

// counts is "2 -> 1", or with a parameter-server change "workers 2 -> 1,
// parameter servers 1 -> 2".
func (a Action) counts() string {
	if a.PSGroup != "" {
		return fmt.Sprintf("workers %d -> %d, parameter servers %d -> %d", a.From, a.To, a.PSFrom, a.PSTo)
	}
	return fmt.Sprintf("%d -> %d", a.From, a.To)
}

// shrinkMessage explains a shrink of a running job by its cause: a queue's
// reclaim, room for the jobs that grow in the same round, or else the
// policy's own reason.
func shrinkMessage(a Action) string {
	msg := fmt.Sprintf("caravan planner: %s %s", a.Kind, a.counts())
	switch {
	case a.ReclaimedBy != "":
		msg += fmt.Sprintf(" (reclaimed by queue %s): the queue takes back GPUs this job borrowed", a.ReclaimedBy)
	case a.RoomFor != "":
		msg += fmt.Sprintf(" to make room for %s (their next workers save more time per share than this job's)", a.RoomFor)
	default:
		msg += ": " + strings.TrimPrefix(a.Reason, "marginal gain: ")
	}
	if a.Saving < 0 && !math.IsInf(a.Saving, 0) {
		msg += fmt.Sprintf(", predicted %.0f s later for this job", -a.Saving)
	}
	return msg
}

// noteRoomFor names, on each shrink or suspension that is not a reclaim,
// the jobs that grow in the same round, and those waiting for workers the
// plan gives them.
func noteRoomFor(actions []Action, waiting []string) {
	growing := waiting
	for _, a := range actions {
		if a.To > a.From {
			growing = append(growing, jobName(a.Job))
		}
	}
	if len(growing) == 0 {
		return
	}
	for i := range actions {
		if a := &actions[i]; a.To < a.From && a.ReclaimedBy == "" && (a.Kind == KindScale || a.Kind == KindSuspend) {
			a.RoomFor = strings.Join(growing, ", ")
		}
	}
}

// jobName is a job's ID, with its namespace when that is not "default".
func jobName(key string) string {
	return strings.TrimPrefix(key, "default/")
}
