package source

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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
	// may choose while the job runs. Without them the worker group's
	// `scaling { min max }` block gives the bounds (min at least 1), and
	// without either 1 and 8. Inside a scaling block they may only narrow
	// it: Nomad refuses any count outside the block.
	MetaMinWorkers = "caravan_min_workers"
	MetaMaxWorkers = "caravan_max_workers"
	// MetaMinPS and MetaMaxPS bound the parameter-server count (default:
	// the ps group's scaling block, else 1 and 4), with the same precedence.
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
	// MetaResizeCost is what changing the worker or parameter-server count
	// of the running job costs it, as a duration ("2s"): a job whose tasks
	// all restart from a checkpoint on a resize costs the planner's
	// restart_cost (the default); an elastic one that takes new workers at
	// its next step, much less. Suspending and resuming always cost a
	// restart.
	MetaResizeCost = "caravan_resize_cost"
	// MetaMinGPUShares and MetaMaxGPUShares bound the GPU shares per worker
	// a right-sizing recommendation, an applied resize or a regrowth after
	// running out of GPU memory may name (each at least 1; default 1 and
	// the GPU's share count).
	MetaMinGPUShares = "caravan_min_gpu_shares"
	MetaMaxGPUShares = "caravan_max_gpu_shares"
	// MetaRightsize is "recommend" (the default: the planner shows a share
	// count measured from the job's reports) or "apply" (it also resizes
	// the worker group's GPU device count to it, a checkpointed resize).
	// Without the key, the job's team queue's rightsize setting decides.
	MetaRightsize = "caravan_rightsize"
	// MetaPack is "auto" (the default) or "never": a "never" job is not
	// packed by the packing policy, and live packing (when on) leaves a
	// GPU it shares to the job's own choice (planner/POLICY.md).
	MetaPack = "caravan_pack"
)

// Values of MetaRightsize and MetaPack.
const (
	RightsizeRecommend = "recommend"
	RightsizeApply     = "apply"
	PackAuto           = "auto"
	PackNever          = "never"
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
	// ResizeCostSeconds is the declared cost of a resize (0: the
	// planner's restart_cost).
	ResizeCostSeconds float64 `json:"resize_cost_seconds,omitempty"`
	// MinGPUShares and MaxGPUShares are the meta's bounds on a share
	// recommendation (0: unset).
	MinGPUShares int `json:"min_gpu_shares,omitempty"`
	MaxGPUShares int `json:"max_gpu_shares,omitempty"`
	// Rightsize and Pack are the caravan_rightsize and caravan_pack modes;
	// RightsizeSet says the meta set Rightsize (else the queue's setting
	// decides).
	Rightsize    string `json:"rightsize"`
	RightsizeSet bool   `json:"rightsize_set,omitempty"`
	Pack         string `json:"pack"`
	// Bounds says where each bound came from: "default", "scaling" (the
	// group's scaling block) or "meta".
	Bounds BoundsSource `json:"bounds_source"`
	// NomadMinWorkers is the least worker count Nomad accepts (the worker
	// group's scaling min, else 0): a suspension or a user-error stop below
	// it stops the job instead of scaling it.
	NomadMinWorkers int `json:"nomad_min_workers"`
	// Warnings lists meta the planner ignores (unknown caravan_* keys, with
	// the known key they probably meant).
	Warnings []string `json:"warnings,omitempty"`
}

// BoundsSource records which setting each bound was taken from.
type BoundsSource struct {
	Workers string `json:"workers"`
	PS      string `json:"ps,omitempty"`
}

// Enabled reports whether a job's meta opts it in.
func Enabled(meta map[string]string) bool {
	v := strings.ToLower(strings.TrimSpace(meta[MetaEnabled]))
	return v == "true" || v == "enabled" || v == "1"
}

// ErrBadMeta wraps every meta parsing error.
var ErrBadMeta = errors.New("invalid planner meta")

// ParseSpec reads a job's planner meta and its groups' scaling blocks.
// Errors name the key.
func ParseSpec(job *nomadapi.Job) (Spec, error) {
	meta := job.Meta
	s := Spec{
		Priority: 50, Suspendable: true, SpeedModel: "allreduce", MaxUserFails: 2,
		Kind: meta[MetaKind], Rightsize: RightsizeRecommend, Pack: PackAuto,
	}
	p := metaParser{meta: meta}
	minW, maxW := p.optInt(MetaMinWorkers, 0), p.optInt(MetaMaxWorkers, 1)
	minPS, maxPS := p.optInt(MetaMinPS, 0), p.optInt(MetaMaxPS, 0)
	p.intKey(MetaPriority, &s.Priority, 1)
	p.intKey(MetaMaxRestarts, &s.MaxUserFails, 0)
	p.intKey(MetaGPUShares, &s.GPUShares, 0)
	p.floatKey(MetaTargetLoss, &s.TargetLoss)
	p.floatKey(MetaConvergeDelta, &s.ConvergeDelta)
	p.floatKey(MetaTotalSteps, &s.TotalSteps)
	p.durationKey(MetaResizeCost, &s.ResizeCostSeconds)
	p.boolKey(MetaGang, &s.Gang)
	p.boolKey(MetaStopOnConverge, &s.StopOnConverge)
	p.boolKey(MetaSuspendable, &s.Suspendable)
	if s.Priority > 100 {
		p.bad(MetaPriority, "want 1..100, got %d", s.Priority)
	}
	if v, ok := meta[MetaSpeedModel]; ok {
		switch v {
		case "allreduce", "ps-sync", "ps-async":
			s.SpeedModel = v
		default:
			p.bad(MetaSpeedModel, "want allreduce, ps-sync or ps-async, got %q", v)
		}
	}
	p.gpuShareKeys(&s)
	s.Warnings = UnknownKeys(meta)
	p.groups(job, &s)
	if s.WorkerGroup != "" {
		sc := groupScaling(job, s.WorkerGroup)
		s.MinWorkers, s.MaxWorkers, s.Bounds.Workers = p.bounds(sc, boundKeys{MetaMinWorkers, MetaMaxWorkers, "worker"}, minW, maxW, 1, 8)
		if sc != nil && sc.Min != nil && *sc.Min > 0 {
			s.NomadMinWorkers = int(*sc.Min)
			p.noSuspend(&s)
		}
	}
	if s.PSGroup != "" {
		s.MinPS, s.MaxPS, s.Bounds.PS = p.bounds(groupScaling(job, s.PSGroup), boundKeys{MetaMinPS, MetaMaxPS, "ps"}, minPS, maxPS, 1, 4)
	} else {
		s.MinPS, s.MaxPS = orDefault(minPS, 1), orDefault(maxPS, 4)
	}
	return s, errors.Join(p.errs...)
}

// gpuShareKeys reads the right-sizing and packing keys.
func (p *metaParser) gpuShareKeys(s *Spec) {
	p.intKey(MetaMinGPUShares, &s.MinGPUShares, 1)
	p.intKey(MetaMaxGPUShares, &s.MaxGPUShares, 1)
	if s.MinGPUShares > 0 && s.MaxGPUShares > 0 && s.MinGPUShares > s.MaxGPUShares {
		p.bad(MetaMinGPUShares, "%d is above %s (%d)", s.MinGPUShares, MetaMaxGPUShares, s.MaxGPUShares)
	}
	if v, ok := p.meta[MetaRightsize]; ok {
		switch w := strings.TrimSpace(v); w {
		case RightsizeRecommend, RightsizeApply:
			s.Rightsize = w
			s.RightsizeSet = true
		default:
			p.bad(MetaRightsize, "want %q or %q, got %q", RightsizeRecommend, RightsizeApply, v)
		}
	}
	if v, ok := p.meta[MetaPack]; ok {
		switch w := strings.TrimSpace(v); w {
		case PackAuto, PackNever:
			s.Pack = w
		default:
			p.bad(MetaPack, "want %q or %q, got %q", PackAuto, PackNever, v)
		}
	}
}

// noSuspend turns suspension off for a worker group Nomad will not scale to
// zero, and refuses meta that explicitly asks for it.
func (p *metaParser) noSuspend(s *Spec) {
	if v, ok := p.meta[MetaSuspendable]; ok && s.Suspendable {
		p.bad(MetaSuspendable, "%q, but the worker group's scaling min is %d and Nomad refuses a count of 0; "+
			"set scaling { min = 0 } or remove the key", v, s.NomadMinWorkers)
	}
	s.Suspendable = false
}

func orDefault(v *int, def int) int {
	if v == nil {
		return def
	}
	return *v
}

// groups resolves the worker and parameter-server groups.
func (p *metaParser) groups(job *nomadapi.Job, s *Spec) {
	meta := p.meta
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
			p.bad(MetaWorkerGroup, "not set and the job has %d groups, none named worker", len(job.TaskGroups))
		}
	}
	if s.WorkerGroup != "" && !groups[s.WorkerGroup] {
		p.bad(MetaWorkerGroup, "group %q is not in the job", s.WorkerGroup)
		s.WorkerGroup = ""
	}
	s.PSGroup = meta[MetaPSGroup]
	if s.PSGroup != "" {
		if !groups[s.PSGroup] {
			p.bad(MetaPSGroup, "group %q is not in the job", s.PSGroup)
			s.PSGroup = ""
		}
		if s.SpeedModel == "allreduce" {
			s.SpeedModel = "ps-sync"
		}
	}
}

// metaParser collects every meta error, each naming its key.
type metaParser struct {
	meta map[string]string
	errs []error
}

func (p *metaParser) bad(key, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%w: %s: %s", ErrBadMeta, key, fmt.Sprintf(format, args...)))
}

// optInt returns the key's integer, or nil when the key is absent or bad.
func (p *metaParser) optInt(key string, min int) *int {
	v, ok := p.meta[key]
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < min {
		p.bad(key, "want an integer >= %d, got %q", min, v)
		return nil
	}
	return &n
}

func (p *metaParser) intKey(key string, dst *int, min int) {
	if n := p.optInt(key, min); n != nil {
		*dst = *n
	}
}

func (p *metaParser) floatKey(key string, dst *float64) {
	v, ok := p.meta[key]
	if !ok {
		return
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f < 0 {
		p.bad(key, "want a non-negative number, got %q", v)
		return
	}
	*dst = f
}

// durationKey reads a duration ("2s") into dst, in seconds.
func (p *metaParser) durationKey(key string, dst *float64) {
	v, ok := p.meta[key]
	if !ok {
		return
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d < 0 {
		p.bad(key, "want a non-negative duration such as \"2s\", got %q", v)
		return
	}
	*dst = d.Seconds()
}

func (p *metaParser) boolKey(key string, dst *bool) {
	v, ok := p.meta[key]
	if !ok {
		return
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		p.bad(key, "want true or false, got %q", v)
		return
	}
	*dst = b
}
