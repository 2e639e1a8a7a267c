// Package packing is the introspective packing policy (issue 31, after
// Gandiva's OSDI'18 "introspective" packing and Optimus's marginal gain):
// it decides, for one planning round, which waiting job's workers go onto
// GPUs that other jobs already share, and which packed job leaves its GPUs
// because the measured rates say the pair loses. It is pure: no Nomad, no
// I/O, no clock; the simulator (planner/simulator/packsim) calls it today,
// and the live planner can call it with the same inputs.
//
// Information classes of the inputs (planner/POLICY.md, "Packing"):
//   - declared: a job's workers, its declared shares per worker, its
//     caravan_pack opt-out, the GPUs' share counts and MPS flags;
//   - online: the shares a job holds now (declared or right-sized), the GPUs
//     it holds, its progress rate measured alone (Solo) and while sharing
//     (Packed, with the rounds it was measured over), the mean ratio it
//     showed with earlier neighbours, and the jobs it was unpacked from;
//   - oracle: nothing. No input says how a job will behave before it did.
package packing

import (
	"math"

	"github.com/caravan-nomad/caravan/planner/policy"
)

// Config holds the policy's thresholds.
type Config struct {
	// Margin: a waiting job is admitted onto a shared GPU by measured gain
	// only when the predicted combined gain is at least 1 + Margin.
	Margin float64
	// UnpackBelow: a GPU whose jobs are all measured is unpacked when their
	// measured combined gain falls below this.
	UnpackBelow float64
	// MinRatio: a GPU is unpacked when a measured job on it runs below this
	// fraction of its solo rate, whatever the combined gain.
	MinRatio float64
	// MaxRatio bounds a job's packed/solo ratio: sharing cannot make a job
	// much faster than alone, so a larger claim is capped (a job that lies
	// about its packed throughput cannot keep a bad pair packed).
	MaxRatio float64
	// MaxRate is the largest plausible progress rate (samples/s), the
	// ingestion bound; a rate above it, negative, NaN or infinite is refused
	// and the job counts as unmeasured.
	MaxRate float64
	// MinRounds is the rounds of packed measurement a job needs before its
	// packed rate counts.
	MinRounds int
	// MaxCandidates bounds the shared GPUs examined per worker (the round's
	// cost stays linear in jobs at 100k jobs).
	MaxCandidates int
}

// DefaultConfig is the policy's defaults (planner/POLICY.md, "Packing").
func DefaultConfig() Config {
	return Config{Margin: 0.1, UnpackBelow: 1.0, MinRatio: 0.7, MaxRatio: 1.1, MaxRate: 1e9, MinRounds: 1, MaxCandidates: 64}
}

// GPU is one physical GPU (declared by the device plugin's attributes).
type GPU struct {
	ID     string
	Shares int  // share count
	MPS    bool // MPS (true) or time-slicing: an input to the measured gain, recorded in reasons
}

// Job is one job as the packing policy sees it. Each worker holds Shares
// shares of its own GPU (a job's workers do not share a GPU with each
// other).
type Job struct {
	ID      string
	Workers int
	// Declared is the shares per worker the jobspec asks for (declared);
	// Shares is what it holds or will be placed at (declared, or a
	// right-sized count: online).
	Declared, Shares int
	// Never is caravan_pack = "never": the job never shares a GPU.
	Never bool
	// GPUs are the indices (into Input.GPUs) it holds now, one per worker;
	// empty while it waits.
	GPUs []int
	// Placed orders running jobs by when they got their GPUs (larger:
	// later); an unpack moves the latest-placed job of a pair.
	Placed int64
	// Solo is the progress rate (samples/s) measured while the job had its
	// GPUs to itself at its current shares; 0: never measured.
	Solo float64
	// Packed is the rate measured over PackedRounds rounds with its current
	// neighbours; 0: not measured with them.
	Packed       float64
	PackedRounds int
	// History is the mean packed/solo ratio the job showed with earlier
	// neighbours and HistoryN how many pairings it rests on (online).
	History  float64
	HistoryN int
	// PeakMemoryBytes is the job's measured peak GPU memory per worker (0:
	// unknown). A negative value is an implausible profile: refused.
	PeakMemoryBytes int64
	// Avoid lists jobs this one was unpacked from: it is not packed with
	// them again.
	Avoid []string
}

// Input is one round's question: every GPU, and the running and waiting
// jobs, waiting ones in admission order.
type Input struct {
	GPUs []GPU
	Jobs []Job
}

// Kind is a decision's kind.
type Kind string

const (
	// Admit places a waiting job's workers on GPUs (Decision.GPUs).
	Admit Kind = "admit"
	// Migrate moves an unpacked job to the GPUs in Decision.GPUs
	// (a checkpointed migration).
	Migrate Kind = "migrate"
	// Suspend stops an unpacked job (no GPUs were free for it).
	Suspend Kind = "suspend"
	// Keep leaves a packed GPU as it is (Decision.Job is the GPU's ID);
	// its reason says why.
	Keep Kind = "keep"
	// Wait leaves a waiting job waiting.
	Wait Kind = "wait"
)

// Basis is the information class a decision rests on.
type Basis string

const (
	// BasisDeclared: declared shares only (no measured gain).
	BasisDeclared Basis = "declared"
	// BasisOnline: rates measured so far.
	BasisOnline Basis = "online"
)

// Decision is one job's (or one packed GPU's) decision and its reason.
type Decision struct {
	Job  string
	Kind Kind
	GPUs []int // admit / migrate: the GPUs, one per worker
	// Gain is the predicted (admit) or measured (unpack, keep) combined
	// gain on the GPU decided about; NaN when none applies.
	Gain  float64
	Basis Basis
	// Neighbours are the jobs it shares (admit) or left (unpack) a GPU with.
	Neighbours []string
	Reason     string
}

// Plan is a round's decisions: unpacks and keeps first, then admissions
// and waits in admission order.
type Plan struct {
	Decisions []Decision
}

// ratio is a job's measured packed/solo ratio, bounded; ok is false when
// either rate is missing or implausible.
func (c Config) ratio(j *Job) (float64, bool) {
	if !c.plausible(j.Solo) || !c.plausible(j.Packed) || j.PackedRounds < c.MinRounds || j.PeakMemoryBytes < 0 {
		return 0, false
	}
	return math.Min(j.Packed/j.Solo, c.MaxRatio), true
}

// soloKnown reports whether the job has a plausible solo rate.
func (c Config) soloKnown(j *Job) bool { return c.plausible(j.Solo) && j.PeakMemoryBytes >= 0 }

// estimate is what the job is expected to keep of its solo rate when
// packed: its measured ratio with its current neighbours, else its history.
func (c Config) estimate(j *Job) (float64, bool) {
	if r, ok := c.ratio(j); ok {
		return r, true
	}
	if c.soloKnown(j) && j.HistoryN > 0 && !math.IsNaN(j.History) && j.History > 0 {
		return math.Min(j.History, c.MaxRatio), true
	}
	return 0, false
}

func (c Config) plausible(rate float64) bool {
	return rate > 0 && rate <= c.MaxRate && !math.IsNaN(rate) && !math.IsInf(rate, 0)
}

// FromPolicy is the packing view of a job a policy sees (built, like every
// policy job, by history.Record.PolicyJob): its workers (Max, the size a
// FixedSize policy runs it at) and its per-worker GPU demand in shares of
// a GPU of sharesPerGPU. The caller adds the declared shares, the opt-out,
// the GPUs it holds and the measured rates.
func FromPolicy(pj policy.Job, sharesPerGPU int) Job {
	shares := int(math.Round(float64(pj.Worker.GPUMilli) * float64(sharesPerGPU) / policy.MilliGPU))
	return Job{ID: pj.ID, Workers: max(pj.Max, pj.Min, 1), Shares: shares, Declared: shares}
}

// ComputeShares is the least share count whose MPS compute cap
// (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = shares / sharesPerGPU) holds the
// busy fraction of the GPU's SMs the job was measured to use alone (online,
// the device plugin's SM utilisation). On an MPS GPU a resize below it
// would cut the job's compute, so right-sizing there shrinks no further:
// memory alone (planner/rightsize) does not bound an MPS shrink. A busy
// fraction outside [0, 1] or NaN is implausible: the whole GPU.
func ComputeShares(busy float64, sharesPerGPU int) int {
	if math.IsNaN(busy) || busy < 0 || busy > 1 {
		return sharesPerGPU
	}
	return min(sharesPerGPU, max(1, int(math.Ceil(busy*float64(sharesPerGPU)-1e-9))))
}
