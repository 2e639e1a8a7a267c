package source

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	nomadapi "github.com/hashicorp/nomad/api"
)

// Job meta keys through which a job opts in to the planner and describes
// itself. They are documented in planner/README.md.
const (
	// MetaEnabled opts a job in: "true" or "enabled". Jobs without it are
	// never touched.
	MetaEnabled = "caravan_planner"
	// MetaWorkerGroup names the task group of workers (default: the only
	// group, or the group named "worker" or "workers").
	MetaWorkerGroup = "caravan_worker_group"
	// MetaPSGroup names the task group of parameter servers, if any.
	MetaPSGroup = "caravan_ps_group"
	// MetaMinWorkers and MetaMaxWorkers bound the worker count the planner
	// may choose while the job runs (default 1 and 8).
	MetaMinWorkers = "caravan_min_workers"
	MetaMaxWorkers = "caravan_max_workers"
	// MetaMinPS and MetaMaxPS bound the parameter-server count (default 1, 4).
	MetaMinPS = "caravan_min_ps"
	MetaMaxPS = "caravan_max_ps"
	// MetaGang makes the minimum all-or-nothing ("true"): the job never runs
	// with fewer than min workers.
	MetaGang = "caravan_gang"
	// MetaTargetLoss is the loss at which the job is done.
	MetaTargetLoss = "caravan_target_loss"
	// MetaConvergeDelta is the relative loss improvement per 1000 steps below
	// which the job counts as converged.
	MetaConvergeDelta = "caravan_converge_delta"
	// MetaStopOnConverge ("true") lets the planner stop a converged job
	// (after its final checkpoint, which the driver takes on stop).
	MetaStopOnConverge = "caravan_stop_on_converge"
	// MetaPriority weighs the job's gain (1..100, default 50).
	MetaPriority = "caravan_priority"
	// MetaSuspendable ("false" to forbid) lets the planner scale the job to
	// zero under overload (Gandiva time-slicing).
	MetaSuspendable = "caravan_suspendable"
	// MetaTotalSteps is a hint of the steps the job needs, used before the
	// loss curve can be fitted (cold start).
	MetaTotalSteps = "caravan_total_steps"
	// MetaKind groups jobs of the same model family, so finished jobs give
	// priors to new ones.
	MetaKind = "caravan_kind"
	// MetaSpeedModel is "allreduce" (default), "ps-sync" or "ps-async".
	MetaSpeedModel = "caravan_speed_model"
	// MetaGPUShares is the GPU shares each worker uses when its tasks do not
	// request the GPU device (e.g. raw_exec tasks on a cluster without the
	// device plugin); a device request in the worker group wins.
	MetaGPUShares = "caravan_gpu_shares"
	// MetaMaxRestarts bounds how many user-error failures are tolerated
	// before the planner stops the job (default 2).
	MetaMaxRestarts = "caravan_max_user_failures"
)

// Spec is what a managed job's meta says about it.
type Spec struct {
	WorkerGroup    string  `json:"worker_group"`
	PSGroup        string  `json:"ps_group,omitempty"`
	MinWorkers     int     `json:"min_workers"`
	MaxWorkers     int     `json:"max_workers"`
	MinPS          int     `json:"min_ps,omitempty"`
	MaxPS          int     `json:"max_ps,omitempty"`
	Gang           bool    `json:"gang"`
	TargetLoss     float64 `json:"target_loss,omitempty"`
	ConvergeDelta  float64 `json:"converge_delta,omitempty"`
	StopOnConverge bool    `json:"stop_on_converge"`
	Priority       int     `json:"priority"`
	Suspendable    bool    `json:"suspendable"`
	TotalSteps     float64 `json:"total_steps,omitempty"`
	Kind           string  `json:"kind,omitempty"`
	SpeedModel     string  `json:"speed_model"`
	MaxUserFails   int     `json:"max_user_failures"`
	GPUShares      int     `json:"gpu_shares,omitempty"`
}

// Enabled reports whether a job's meta opts it in.
func Enabled(meta map[string]string) bool {
	v := strings.ToLower(strings.TrimSpace(meta[MetaEnabled]))
	return v == "true" || v == "enabled" || v == "1"
}

// ErrBadMeta wraps every meta parsing error.
var ErrBadMeta = errors.New("invalid planner meta")

// ParseSpec reads a job's planner meta. Errors name the key.
func ParseSpec(job *nomadapi.Job) (Spec, error) {
	meta := job.Meta
	s := Spec{
		MinWorkers: 1, MaxWorkers: 8, MinPS: 1, MaxPS: 4,
		Priority: 50, Suspendable: true, SpeedModel: "allreduce", MaxUserFails: 2,
		Kind: meta[MetaKind],
	}
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrBadMeta, key, fmt.Sprintf(format, args...)))
	}
	intKey := func(key string, dst *int, min int) {
		v, ok := meta[key]
		if !ok {
			return
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < min {
			bad(key, "want an integer >= %d, got %q", min, v)
			return
		}
		*dst = n
	}
	floatKey := func(key string, dst *float64) {
		v, ok := meta[key]
		if !ok {
			return
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 {
			bad(key, "want a non-negative number, got %q", v)
			return
		}
		*dst = f
	}
	boolKey := func(key string, dst *bool) {
		v, ok := meta[key]
		if !ok {
			return
		}
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			bad(key, "want true or false, got %q", v)
			return
		}
		*dst = b
	}
	intKey(MetaMinWorkers, &s.MinWorkers, 0)
	intKey(MetaMaxWorkers, &s.MaxWorkers, 1)
	intKey(MetaMinPS, &s.MinPS, 0)
	intKey(MetaMaxPS, &s.MaxPS, 0)
	intKey(MetaPriority, &s.Priority, 1)
	intKey(MetaMaxRestarts, &s.MaxUserFails, 0)
	intKey(MetaGPUShares, &s.GPUShares, 0)
	floatKey(MetaTargetLoss, &s.TargetLoss)
	floatKey(MetaConvergeDelta, &s.ConvergeDelta)
	floatKey(MetaTotalSteps, &s.TotalSteps)
	boolKey(MetaGang, &s.Gang)
	boolKey(MetaStopOnConverge, &s.StopOnConverge)
	boolKey(MetaSuspendable, &s.Suspendable)
	if s.Priority > 100 {
		bad(MetaPriority, "want 1..100, got %d", s.Priority)
	}
	if s.MinWorkers > s.MaxWorkers {
		bad(MetaMinWorkers, "min %d exceeds max %d", s.MinWorkers, s.MaxWorkers)
	}
	if v, ok := meta[MetaSpeedModel]; ok {
		switch v {
		case "allreduce", "ps-sync", "ps-async":
			s.SpeedModel = v
		default:
			bad(MetaSpeedModel, "want allreduce, ps-sync or ps-async, got %q", v)
		}
	}

	groups := map[string]bool{}
	for _, tg := range job.TaskGroups {
		if tg.Name != nil {
			groups[*tg.Name] = true
		}
	}
	s.WorkerGroup = meta[MetaWorkerGroup]
	if s.WorkerGroup == "" {
		switch {
		case len(job.TaskGroups) == 1 && job.TaskGroups[0].Name != nil:
			s.WorkerGroup = *job.TaskGroups[0].Name
		case groups["worker"]:
			s.WorkerGroup = "worker"
		case groups["workers"]:
			s.WorkerGroup = "workers"
		default:
			bad(MetaWorkerGroup, "not set and the job has %d groups, none named worker", len(job.TaskGroups))
		}
	}
	if s.WorkerGroup != "" && !groups[s.WorkerGroup] {
		bad(MetaWorkerGroup, "group %q is not in the job", s.WorkerGroup)
	}
	s.PSGroup = meta[MetaPSGroup]
	if s.PSGroup != "" {
		if !groups[s.PSGroup] {
			bad(MetaPSGroup, "group %q is not in the job", s.PSGroup)
		}
		if s.SpeedModel == "allreduce" {
			s.SpeedModel = "ps-sync"
		}
	}
	return s, errors.Join(errs...)
}
