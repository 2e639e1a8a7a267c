// Package manager is the planner's decision loop: every interval (and when
// Nomad changes) it reads the source's snapshot and the progress store,
// refits each managed job's models, asks planner/policy for a plan, turns
// the plan into rate-limited, restart-cost-aware actions (including Gandiva
// time-slicing: suspend by scaling to 0, resume later), and, when it leads
// and is not in dry-run, submits them.
package manager

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/planner/policy"
	"github.com/caravan-nomad/caravan/planner/queue"
	"github.com/caravan-nomad/caravan/planner/service/clock"
	"github.com/caravan-nomad/caravan/planner/service/config"
	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/source"
	"github.com/caravan-nomad/caravan/planner/service/submit"
)

// Snapshotter is the source as the manager uses it.
type Snapshotter interface {
	Snapshot() source.Snapshot
	Changes() <-chan struct{}
	ScaleStatus(ctx context.Context, key source.JobKey) (*nomadapi.JobScaleStatusResponse, error)
}

// Writer submits decisions (submit.Writer).
type Writer interface {
	Scale(ctx context.Context, s submit.Scale) (submit.Result, error)
	Register(ctx context.Context, job *nomadapi.Job, modifyIndex uint64, reason string) (submit.Result, error)
	Stop(ctx context.Context, job *nomadapi.Job, modifyIndex uint64, reason string) (submit.Result, error)
}

// Leader says whether this instance may write.
type Leader interface{ IsLeader() bool }

// Settings are the tunables of the loop (from config.Policy and Capacity).
type Settings struct {
	// Policy (its Name selects the policy) and Capacity are the config
	// file's blocks, as they are: one definition of each tunable.
	config.Policy
	config.Capacity
	DryRun bool
	// Queues are the team queues; none configured: one pool.
	Queues queue.Config
	// QueueRightsize is each queue's rightsize setting ("apply" or
	// "recommend"), by queue name, for jobs without caravan_rightsize.
	QueueRightsize map[string]string
	// Packing is live introspective packing (packing.go).
	Packing config.Packing
}

// Config wires a Manager.
type Config struct {
	Settings Settings
	Source   Snapshotter
	Progress *ingest.Store
	Writer   Writer
	Leader   Leader
	Clock    clock.Clock
	Logger   hclog.Logger
}

// Manager runs rounds.
type Manager struct {
	cfg Config
	log hclog.Logger

	mu       sync.Mutex
	settings Settings
	pol      policy.Policy
	mem      map[source.JobKey]*memory
	history  map[source.JobKey][]Decision
	priors   priors
	last     *Round
	metrics  Metrics
	kick     chan struct{}
	// forbidden records the kinds of action already reported as beyond
	// the token's ACL capabilities (logged once each).
	forbidden map[Kind]bool
	// planForbidden: the token's refusal of Nomad's plan was logged.
	planForbidden bool
	// reclaims are the newest reclaims applied, oldest first.
	reclaims []Reclaim
	// lastDecided is the newest round that decided (not skipped or
	// failed): logGuarantees compares with it.
	lastDecided *Round
	// packLast is the newest unpack decided on each GPU, by uuid.
	packLast map[string]*PackDecision
}

// Metrics are cumulative counters for /v1/metrics.
type Metrics struct {
	Rounds          uint64
	RoundErrors     uint64
	Applied         map[Kind]uint64
	Conflicts       uint64
	WriteErrors     uint64
	Deferred        uint64
	LastRoundMillis float64
	// RoundSeconds is the histogram of round durations.
	RoundSeconds Histogram
}

// RoundBuckets are the upper bounds (seconds) of RoundSeconds' buckets: a
// round reads a snapshot and fits models (milliseconds) and may write to
// Nomad (tens of milliseconds each, up to seconds when Nomad is slow).
var RoundBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Histogram counts observations into fixed buckets, Prometheus style.
type Histogram struct {
	Bounds []float64 // upper bounds
	Counts []uint64  // per bucket, not cumulative; one more for +Inf
	Sum    float64
	Count  uint64
}

// Observe adds one observation.
func (h *Histogram) Observe(v float64) {
	if h.Counts == nil {
		h.Counts = make([]uint64, len(h.Bounds)+1)
	}
	i := sort.SearchFloat64s(h.Bounds, v) // first bound >= v
	h.Counts[i]++
	h.Sum += v
	h.Count++
}

// Cumulative returns the bucket counts keyed by upper bound, as Prometheus
// wants them.
func (h Histogram) Cumulative() map[float64]uint64 {
	out := make(map[float64]uint64, len(h.Bounds))
	var n uint64
	for i, b := range h.Bounds {
		if i < len(h.Counts) {
			n += h.Counts[i]
		}
		out[b] = n
	}
	return out
}

// New returns a Manager; it fails for an unknown policy name.
func New(cfg Config) (*Manager, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	p, err := policy.New(cfg.Settings.Policy.Name)
	if err != nil {
		return nil, fmt.Errorf("planner policy: %w", err)
	}
	return &Manager{
		cfg:      cfg,
		log:      cfg.Logger.Named("manager"),
		settings: cfg.Settings,
		pol:      p,
		mem:      map[source.JobKey]*memory{},
		history:  map[source.JobKey][]Decision{},
		priors:   priors{},
		metrics:  Metrics{Applied: map[Kind]uint64{}, RoundSeconds: Histogram{Bounds: RoundBuckets}},
		kick:     make(chan struct{}, 1),
		packLast: map[string]*PackDecision{},
	}, nil
}

// Reload swaps the settings (SIGHUP). A new policy name starts a fresh policy.
func (m *Manager) Reload(s Settings) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.Policy.Name != m.settings.Policy.Name {
		p, err := policy.New(s.Policy.Name)
		if err != nil {
			return fmt.Errorf("planner policy: %w", err)
		}
		m.pol = p
	}
	m.settings = s
	m.log.Info("settings reloaded", "policy", s.Policy.Name, "interval", s.Interval, "dry_run", s.DryRun)
	m.Kick()
	return nil
}

// Kick asks for a round now (e.g. after a progress report or leadership change).
func (m *Manager) Kick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Last returns the most recent round (nil before the first).
func (m *Manager) Last() *Round {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// MetricsSnapshot returns a copy of the counters.
func (m *Manager) MetricsSnapshot() Metrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	cp := m.metrics
	cp.RoundSeconds.Counts = slices.Clone(m.metrics.RoundSeconds.Counts)
	cp.Applied = make(map[Kind]uint64, len(m.metrics.Applied))
	for k, v := range m.metrics.Applied {
		cp.Applied[k] = v
	}
	return cp
}

// debounce is the least time between a change in Nomad and the round it
// triggers (allocations change in bursts).
const debounce = 2 * time.Second

// Run runs rounds every interval, when kicked, and when Nomad changes (new
// jobs start sooner, freed capacity is reused), until ctx ends. Rounds
// triggered by changes come at most every quarter interval, so a busy
// cluster does not turn the planner into a refitting loop.
func (m *Manager) Run(ctx context.Context) error {
	for {
		m.mu.Lock()
		interval := m.settings.Interval
		m.mu.Unlock()
		started := m.cfg.Clock.Now()
		r, err := m.RunRound(ctx)
		if err != nil && ctx.Err() == nil {
			m.log.Warn("round failed", "error", err)
		}
		gap := interval / 4
		if r != nil && r.Skipped != "" {
			gap = 0 // nothing decided yet (Nomad not read): the first change counts
		}
		var changed <-chan time.Time
		next := m.cfg.Clock.After(interval)
	wait:
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-next:
		case <-m.kick:
		case <-changed:
		case <-m.cfg.Source.Changes():
			if changed == nil {
				earliest := started.Add(gap).Sub(m.cfg.Clock.Now())
				changed = m.cfg.Clock.After(min(max(debounce, earliest), interval))
			}
			goto wait
		}
	}
}

// RunRound makes one decision round and, if leading and not in dry-run,
// applies it.
func (m *Manager) RunRound(ctx context.Context) (*Round, error) {
	start := time.Now()
	m.mu.Lock()
	s := m.settings
	pol := m.pol
	m.mu.Unlock()

	r, err := m.decide(ctx, s, pol)
	if err == nil && r.Skipped == "" {
		m.apply(ctx, s, r)
	}
	if err != nil {
		r.Error = err.Error()
	}
	m.mu.Lock()
	if err == nil && r.Skipped == "" {
		m.settle(r)
	}
	if len(m.reclaims) > 0 {
		r.Reclaims = slices.Clone(m.reclaims)
	}
	if err == nil && r.Skipped == "" {
		m.logGuarantees(m.lastDecided, r)
		m.lastDecided = r
	}
	m.last = r
	m.metrics.Rounds++
	if err != nil {
		m.metrics.RoundErrors++
	}
	took := time.Since(start)
	m.metrics.LastRoundMillis = float64(took.Microseconds()) / 1000
	m.metrics.RoundSeconds.Observe(took.Seconds())
	m.mu.Unlock()
	return r, err
}

func (m *Manager) memFor(k source.JobKey) *memory {
	mm := m.mem[k]
	if mm == nil {
		mm = &memory{speed: map[shape]float64{}}
		m.mem[k] = mm
	}
	return mm
}
