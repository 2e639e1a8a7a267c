package manager

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/planner/packing"
	"github.com/caravan-nomad/caravan/planner/service/config"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

// KindUnpack moves a job off a GPU it shares with jobs it loses against:
// a registration of the same counts with a device constraint that keeps
// its workers off that GPU (a checkpointed migration).
const KindUnpack Kind = "unpack"

// ActionUnpack is the scaling event's caravan_action of an unpack that
// migrates (one that suspends records submit.ActionSuspend).
const ActionUnpack = "unpack"

// uuidAttr is the device attribute an unpack's constraint is on.
const uuidAttr = "${device.attr.uuid}"

// Meta keys of an unpack's scaling event: the measured numbers.
const (
	metaPackGPU        = "caravan_pack_gpu"
	metaPackGain       = "caravan_pack_measured_gain"
	metaPackNeighbours = "caravan_pack_neighbours"
	metaPackRatio      = "caravan_pack_ratio"
	metaPackSolo       = "caravan_pack_solo_samples_per_sec"
	metaPackPacked     = "caravan_pack_packed_samples_per_sec"
	metaPackMode       = "caravan_pack_gpu_mode"
	metaPackMeasured   = "caravan_pack_measured"
)

// Unpack is a job moved off a shared GPU this round.
type Unpack struct {
	// GPU is the uuid of the GPU it leaves; Neighbours the jobs it
	// shared it with.
	GPU        string   `json:"gpu"`
	Neighbours []string `json:"neighbours"`
	// Gain is the GPU's measured combined gain (absent when a job on it
	// was not measured: the unpack then rests on a measured job below
	// min_ratio).
	Gain    *float64 `json:"measured_gain,omitempty"`
	Suspend bool     `json:"suspend"`
	Reason  string   `json:"reason"`

	device string
	meta   map[string]any
	last   *PackDecision
}

// PackingView is the round's live packing: every GPU of the configured
// device, who shares it, the measured combined gain and the decisions.
type PackingView struct {
	// Enabled: the planner acts on unpack decisions (packing.enabled);
	// off, they are shown only.
	Enabled     bool      `json:"enabled"`
	Margin      float64   `json:"margin"`
	UnpackBelow float64   `json:"unpack_below"`
	MinRatio    float64   `json:"min_ratio"`
	GPUs        []GPUView `json:"gpus"`
	Error       string    `json:"error,omitempty"`
}

// GPUView is one GPU as live packing sees it.
type GPUView struct {
	ID     string   `json:"id"`
	Node   string   `json:"node"`
	MPS    bool     `json:"mps"`
	Shares int      `json:"shares"`
	Used   int      `json:"used_shares"`
	Jobs   []GPUJob `json:"jobs"`
	// Gain is the measured combined gain (the sum of each job's packed /
	// solo ratio), when every job on a shared GPU is measured.
	Gain *float64 `json:"measured_gain,omitempty"`
	// Judgement is this round's decision on a shared GPU, with its reason.
	Judgement string `json:"judgement,omitempty"`
	// Last is the newest unpack decided on this GPU (any round).
	Last *PackDecision `json:"last_decision,omitempty"`
}

// GPUJob is one job on a GPU, with its measured rates (samples/s).
type GPUJob struct {
	Job          string   `json:"job"`
	Shares       int      `json:"shares"`
	Solo         *float64 `json:"solo_samples_per_sec,omitempty"`
	Packed       *float64 `json:"packed_samples_per_sec,omitempty"`
	Ratio        *float64 `json:"ratio,omitempty"`
	PackedRounds int      `json:"packed_rounds,omitempty"`
	Never        bool     `json:"never,omitempty"`
}

// PackDecision is an unpack decided on a GPU.
type PackDecision struct {
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"` // migrate or suspend (packing.Kind)
	Job    string    `json:"job"`
	Gain   *float64  `json:"measured_gain,omitempty"`
	Basis  string    `json:"basis"`
	Reason string    `json:"reason"`
	// Status: decided (packing on; see the round's action for what Nomad
	// took), shown (packing off), waiting (the constraint is written;
	// Nomad has not moved the job yet), skipped (why in Reason).
	Status string `json:"status"`
}

// Statuses of a PackDecision.
const (
	PackDecided = "decided"
	PackShown   = "shown"
	PackWaiting = "waiting"
	PackSkipped = "skipped"
	PackApplied = "applied"
)

// JobPacking is a job's live packing measurements, in its view.
type JobPacking struct {
	GPUs         []string `json:"gpus"`
	Neighbours   []string `json:"neighbours,omitempty"`
	Solo         *float64 `json:"solo_samples_per_sec,omitempty"`
	Packed       *float64 `json:"packed_samples_per_sec,omitempty"`
	PackedRounds int      `json:"packed_rounds,omitempty"`
	History      *float64 `json:"history_ratio,omitempty"`
	HistoryN     int      `json:"history_pairings,omitempty"`
	Avoid        []string `json:"unpacked_from,omitempty"`
}

// packConfig is the policy's configuration from the planner's block.
func packConfig(p config.Packing) packing.Config {
	c := packing.DefaultConfig()
	c.Margin, c.UnpackBelow, c.MinRatio = p.Margin, p.UnpackBelow, p.MinRatio
	return c
}

// pack judges every shared GPU by its jobs' measured rates and, when
// packing is on, turns each unpack into an action: a migration off the GPU
// (a device constraint) or, with no free GPU for it, a suspension. It runs
// after act, so a job the plan already changes this round is left to it.
func (b *roundBuilder) pack() {
	in, gpus, jobs := b.packInputs()
	cfg := packConfig(b.s.Packing)
	view := &PackingView{Enabled: b.s.Packing.Enabled, Margin: cfg.Margin, UnpackBelow: cfg.UnpackBelow, MinRatio: cfg.MinRatio}
	b.r.Packing = view
	plan, err := packing.Decide(cfg, in)
	if err != nil {
		view.Error = err.Error()
		b.errs = append(b.errs, fmt.Errorf("packing: %w", err))
		return
	}
	b.packViews(view, in, gpus, jobs)
	byID := map[string]int{}
	for i := range in.Jobs {
		byID[in.Jobs[i].ID] = i
	}
	added := false
	for _, d := range plan.Decisions {
		switch d.Kind {
		case packing.Keep:
			for g := range view.GPUs {
				if view.GPUs[g].ID == d.Job {
					view.GPUs[g].Judgement = d.Reason
				}
			}
		case packing.Migrate, packing.Suspend:
			i := byID[d.Job]
			g := sharedGPU(in, i, d.Neighbours)
			if g < 0 {
				continue
			}
			if a := b.unpack(d, in, i, gpus[g].ID, jobs[i], &view.GPUs[g]); a != nil {
				b.r.Actions = append(b.r.Actions, *a)
				added = true
			}
		}
	}
	if added {
		order(b.r.Actions)
	}
}

// sharedGPU is the GPU job i shares with any of the neighbours (-1: none).
func sharedGPU(in packing.Input, i int, neighbours []string) int {
	for _, g := range in.Jobs[i].GPUs {
		for k := range in.Jobs {
			if k != i && slices.Contains(neighbours, in.Jobs[k].ID) && slices.Contains(in.Jobs[k].GPUs, g) {
				return g
			}
		}
	}
	return -1
}

// unpack records an unpack decision on its GPU and returns its action,
// nil when none is written this round (packing off, the plan already
// changes the job, the constraint is written and Nomad has not moved the
// job yet, or the job cannot be steered).
func (b *roundBuilder) unpack(d packing.Decision, in packing.Input, i int, gpu string, pj packJob, gv *GPUView) *Action {
	pd := &PackDecision{Time: b.now, Kind: string(d.Kind), Job: d.Job, Gain: finite(d.Gain), Basis: string(d.Basis), Reason: d.Reason, Status: PackDecided}
	gv.Judgement, gv.Last = d.Reason, pd
	b.m.packLast[gpu] = pd
	j := pj.job
	dev, why := workerDevice(j, b.s)
	switch {
	case !b.s.Packing.Enabled:
		pd.Status = PackShown
		return nil
	case why != "":
		pd.Status, pd.Reason = PackSkipped, d.Reason+"; not steered: "+why
		return nil
	case in.Jobs[i].Never:
		// Only when every job on the GPU opted out: none is moved.
		pd.Status, pd.Reason = PackSkipped, d.Reason+`; not moved: caravan_pack = "never"`
		return nil
	case avoids(j.Job, j.Spec.WorkerGroup, dev, gpu):
		pd.Status = PackWaiting
		pd.Reason += "; the constraint is written, Nomad has not moved the job yet"
		return nil
	}
	for _, a := range b.r.Actions {
		if a.key == pj.key {
			pd.Status, pd.Reason = PackSkipped, d.Reason+"; the plan changes the job this round ("+string(a.Kind)+")"
			return nil
		}
	}
	v := &b.r.Jobs[pj.view]
	u := &Unpack{GPU: gpu, Neighbours: d.Neighbours, Gain: finite(d.Gain), Suspend: d.Kind == packing.Suspend, Reason: d.Reason,
		device: dev, meta: unpackMeta(d, in, i, gpu), last: pd}
	a := Action{Job: pj.key.String(), key: pj.key, job: j, Group: j.Spec.WorkerGroup, From: v.Workers, To: v.Workers,
		Kind: KindUnpack, Reason: d.Reason, jobModifyIndex: v.Index, Unpack: u}
	if u.Suspend {
		a.Kind, a.To = KindSuspend, 0
	}
	a.Message = unpackMessage(a)
	return &a
}

// unpackMeta are the measured numbers an unpack's event carries.
func unpackMeta(d packing.Decision, in packing.Input, i int, gpu string) map[string]any {
	j := in.Jobs[i]
	m := map[string]any{metaPackGPU: gpu, metaPackNeighbours: strings.Join(d.Neighbours, ","), metaPackMode: "time-sliced"}
	if g := j.GPUs; len(g) > 0 && in.GPUs[g[0]].MPS {
		m[metaPackMode] = "mps"
	}
	if f := finite(d.Gain); f != nil {
		m[metaPackGain] = fmt.Sprintf("%.3g", *f)
	}
	if j.Solo > 0 {
		m[metaPackSolo] = fmt.Sprintf("%.4g", j.Solo)
	}
	if j.Packed > 0 {
		m[metaPackPacked] = fmt.Sprintf("%.4g", j.Packed)
		if j.Solo > 0 {
			m[metaPackRatio] = fmt.Sprintf("%.3g", j.Packed/j.Solo)
		}
	}
	// Every measured job on the GPU: the numbers the decision rests on
	// (the moved job may be unmeasured when a neighbour's loss moves it).
	var measured []string
	for _, o := range in.Jobs {
		if o.Solo > 0 && o.Packed > 0 && slices.ContainsFunc(o.GPUs, func(g int) bool { return in.GPUs[g].ID == gpu }) {
			measured = append(measured, fmt.Sprintf("%s %.4g of %.4g/s solo", o.ID, o.Packed, o.Solo))
		}
	}
	if len(measured) > 0 {
		m[metaPackMeasured] = strings.Join(measured, "; ")
	}
	return m
}

// unpackMessage is the text of an unpack's scaling event.
func unpackMessage(a Action) string {
	how := "migrated off the GPU by a device constraint; the job resumes from the checkpoint the driver takes on stop"
	if a.Unpack.Suspend {
		how = fmt.Sprintf("suspended %d -> 0, no free GPU for it; kept off that GPU when it resumes", a.From)
	}
	return fmt.Sprintf("caravan planner: unpack from GPU %s (%s): %s", a.Unpack.GPU, how, a.Unpack.Reason)
}

// finite is x, or nil for NaN and infinities (JSON has neither).
func finite(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// avoids reports whether the job's worker group already keeps the device
// off the GPU.
func avoids(job *nomadapi.Job, group, device, gpu string) bool {
	for _, tg := range job.TaskGroups {
		if tg.Name == nil || *tg.Name != group {
			continue
		}
		for _, t := range tg.Tasks {
			if t.Resources == nil {
				continue
			}
			for _, d := range t.Resources.Devices {
				if d == nil || d.Name != device {
					continue
				}
				for _, c := range d.Constraints {
					if c != nil && c.LTarget == uuidAttr && c.Operand == "!=" && c.RTarget == gpu {
						return true
					}
				}
			}
		}
	}
	return false
}

// avoidGPU returns a copy of job whose worker tasks' device request keeps
// off the GPU: a constraint ${device.attr.uuid} != gpu.
func avoidGPU(job *nomadapi.Job, group, device, gpu string) (*nomadapi.Job, error) {
	return submit.EditDevice(job, group, device, fmt.Sprintf("keeping %s off GPU %s", device, gpu), func(d *nomadapi.RequestedDevice) {
		d.Constraints = append(d.Constraints, nomadapi.NewConstraint(uuidAttr, "!=", gpu))
	})
}

// writeUnpack applies an unpack: one registration (EnforceIndex) of the
// version read with a device constraint that keeps the workers off the
// GPU (and, for a suspension, the worker count at 0), then a count-less
// scaling event with the measured numbers, since a registration records
// none. Nomad replaces the group's allocations; the caravan driver
// checkpoints each task as it stops and the new ones restore from it.
func (m *Manager) writeUnpack(ctx context.Context, a *Action, c submit.Change) error {
	cp, err := c.Version()
	if err != nil {
		return err
	}
	cp, err = avoidGPU(cp, a.Group, a.Unpack.device, a.Unpack.GPU)
	if err != nil {
		return fmt.Errorf("%w: %w", submit.ErrRejected, err)
	}
	res, err := m.cfg.Writer.Register(ctx, cp, c.JobModifyIndex, a.Message)
	a.EvalID = res.EvalID
	if err != nil {
		return err
	}
	ev := c.Event(a.Group, false)
	meta := map[string]any{}
	for k, v := range c.Meta {
		meta[k] = v
	}
	for k, v := range a.Unpack.meta {
		meta[k] = v
	}
	if !a.Unpack.Suspend {
		meta[submit.EventMetaAction] = ActionUnpack
	}
	meta[submit.EventMetaCount] = a.To
	ev.Meta = meta
	if _, err := m.cfg.Writer.Scale(ctx, ev); err != nil {
		m.log.Warn("the job was unpacked but the scaling event was not recorded", "job", a.Job, "error", err)
	}
	m.mu.Lock()
	pm := &m.memFor(a.key).pack
	for _, n := range a.Unpack.Neighbours {
		if !slices.Contains(pm.avoid, n) {
			pm.avoid = append(pm.avoid, n)
		}
	}
	if a.Unpack.last != nil {
		a.Unpack.last.Status = PackApplied
	}
	m.mu.Unlock()
	return nil
}

// packViews fills the per-GPU view and each job's packing view.
func (b *roundBuilder) packViews(view *PackingView, in packing.Input, gpus []packGPU, jobs []packJob) {
	view.GPUs = make([]GPUView, len(gpus))
	for g, pg := range gpus {
		gv := GPUView{ID: pg.ID, Node: pg.node, MPS: pg.MPS, Shares: pg.Shares, Jobs: []GPUJob{}}
		if last := b.m.packLast[pg.ID]; last != nil {
			cp := *last
			gv.Last = &cp
		}
		view.GPUs[g] = gv
	}
	cfg := packConfig(b.s.Packing)
	for i, pj := range in.Jobs {
		jp := &JobPacking{Solo: positive(pj.Solo), PackedRounds: pj.PackedRounds, Avoid: pj.Avoid, HistoryN: pj.HistoryN}
		if pj.HistoryN > 0 {
			jp.History = finite(pj.History)
		}
		pm := &jobs[i].mm.pack
		jp.Neighbours = pm.neighbours
		if len(pm.neighbours) > 0 {
			jp.Packed = positive(pj.Packed)
		}
		for _, g := range pj.GPUs {
			gv := &view.GPUs[g]
			jp.GPUs = append(jp.GPUs, gv.ID)
			gv.Used += pj.Shares
			gj := GPUJob{Job: pj.ID, Shares: pj.Shares, Solo: jp.Solo, Packed: jp.Packed, Never: pj.Never}
			if jp.Packed != nil {
				gj.PackedRounds = pj.PackedRounds
			}
			if jp.Packed != nil && jp.Solo != nil && pj.PackedRounds >= cfg.MinRounds && pj.Packed <= cfg.MaxRate && pj.Solo <= cfg.MaxRate {
				gj.Ratio = finite(math.Min(pj.Packed/pj.Solo, cfg.MaxRatio))
			}
			gv.Jobs = append(gv.Jobs, gj)
		}
		b.r.Jobs[jobs[i].view].Packing = jp
	}
	for g := range view.GPUs {
		gv := &view.GPUs[g]
		if len(gv.Jobs) < 2 {
			continue
		}
		sum := 0.0
		for _, j := range gv.Jobs {
			if j.Ratio == nil {
				sum = math.NaN()
				break
			}
			sum += *j.Ratio
		}
		gv.Gain = finite(sum)
	}
}

// positive is &x for a positive finite x, else nil.
func positive(x float64) *float64 {
	if x > 0 {
		return finite(x)
	}
	return nil
}
