// Package source watches Nomad for the planner: it long-polls jobs,
// allocations and nodes with blocking queries (WaitIndex), keeps the jobs
// that opt in through their meta, and tells the manager when anything
// changed. Nomad being briefly unreachable only delays it (backoff).
package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/internal/allocs"
	"github.com/caravan-nomad/caravan/planner/service/clock"
	"github.com/caravan-nomad/caravan/planner/service/retry"
)

// Config configures a Source.
type Config struct {
	Client *nomadapi.Client
	Clock  clock.Clock
	Logger hclog.Logger
	// Namespace to watch; "*" for all.
	Namespace string
	// Wait bounds one blocking query.
	Wait time.Duration
	// Device is the device name whose instances are GPU shares.
	Device string
	// MinBackoff and MaxBackoff bound the wait after a failed call.
	MinBackoff, MaxBackoff time.Duration
}

// Source is the planner's view of Nomad.
type Source struct {
	cfg Config
	log hclog.Logger

	mu      sync.Mutex
	jobs    map[JobKey]*Job
	allocs  map[JobKey][]*nomadapi.AllocationListStub
	nodes   []Node
	synced  [3]bool
	lastErr error

	changes chan struct{}
}

// New returns a Source; call Run to start watching.
func New(cfg Config) *Source {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "*"
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 5 * time.Minute
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	return &Source{
		cfg:     cfg,
		log:     cfg.Logger.Named("source"),
		jobs:    map[JobKey]*Job{},
		allocs:  map[JobKey][]*nomadapi.AllocationListStub{},
		changes: make(chan struct{}, 1),
	}
}

// Changes receives (coalesced) whenever the snapshot changed.
func (s *Source) Changes() <-chan struct{} { return s.changes }

func (s *Source) notify() {
	select {
	case s.changes <- struct{}{}:
	default:
	}
}

// Snapshot returns a copy of the current view. Jobs' *nomadapi.Job values are
// shared and must not be modified; copy before editing.
func (s *Source) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{
		Jobs:   make(map[JobKey]*Job, len(s.jobs)),
		Nodes:  append([]Node(nil), s.nodes...),
		Synced: s.synced[0] && s.synced[1] && s.synced[2],
		Err:    s.lastErr,
	}
	for k, j := range s.jobs {
		cp := *j
		cp.Allocs = allocs.Current(j.Job, s.allocs[k])
		snap.Jobs[k] = &cp
	}
	return snap
}

// Run watches until ctx ends. It returns ctx.Err().
func (s *Source) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	loops := []func(context.Context, uint64) (uint64, error){s.pollJobs, s.pollAllocs, s.pollNodes}
	names := []string{"jobs", "allocations", "nodes"}
	for i := range loops {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			s.loop(ctx, names[i], loops[i])
		}(i)
	}
	wg.Wait()
	return ctx.Err()
}

// loop runs one blocking query after another, backing off on errors.
func (s *Source) loop(ctx context.Context, name string, poll func(context.Context, uint64) (uint64, error)) {
	log := s.log.With("watch", name)
	b := retry.New(s.cfg.MinBackoff, s.cfg.MaxBackoff)
	var index uint64
	for ctx.Err() == nil {
		next, err := poll(ctx, index)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.setErr(fmt.Errorf("watching %s: %w", name, err))
			log.Warn("nomad query failed, backing off", "error", err)
			if b.Wait(ctx, s.cfg.Clock) != nil {
				return
			}
			continue
		}
		b.Reset()
		s.setErr(nil)
		// An index that goes backwards means the servers' state was reset;
		// start over rather than blocking on an index that will never come.
		if next < index {
			next = 0
		}
		index = next
	}
}

func (s *Source) setErr(err error) {
	s.mu.Lock()
	changed := (s.lastErr == nil) != (err == nil)
	s.lastErr = err
	s.mu.Unlock()
	if changed {
		s.notify()
	}
}

func (s *Source) query(ctx context.Context, index uint64) *nomadapi.QueryOptions {
	q := &nomadapi.QueryOptions{Namespace: s.cfg.Namespace, WaitIndex: index, WaitTime: s.cfg.Wait}
	return q.WithContext(ctx)
}

func (s *Source) pollJobs(ctx context.Context, index uint64) (uint64, error) {
	stubs, qm, err := s.cfg.Client.Jobs().ListOptions(
		&nomadapi.JobListOptions{Fields: &nomadapi.JobListFields{Meta: true}}, s.query(ctx, index))
	if err != nil {
		return 0, err
	}
	seen := map[JobKey]bool{}
	changed := false
	for _, stub := range stubs {
		if !Enabled(stub.Meta) {
			continue
		}
		key := JobKey{Namespace: stub.Namespace, ID: stub.ID}
		seen[key] = true
		s.mu.Lock()
		cur := s.jobs[key]
		s.mu.Unlock()
		if cur != nil && cur.Job.JobModifyIndex != nil && *cur.Job.JobModifyIndex == stub.JobModifyIndex &&
			cur.Job.Status != nil && *cur.Job.Status == stub.Status && cur.Job.ModifyIndex != nil &&
			*cur.Job.ModifyIndex == stub.ModifyIndex {
			continue
		}
		q := (&nomadapi.QueryOptions{Namespace: stub.Namespace}).WithContext(ctx)
		job, _, err := s.cfg.Client.Jobs().Info(stub.ID, q)
		if err != nil {
			var ue nomadapi.UnexpectedResponseError
			if errors.As(err, &ue) && ue.StatusCode() == 404 {
				continue // deleted between list and read
			}
			return 0, fmt.Errorf("reading job %s: %w", key, err)
		}
		j := &Job{Key: key, Job: job}
		j.Spec, j.SpecErr = ParseSpec(job)
		if j.SpecErr != nil && (cur == nil || cur.SpecErr == nil || cur.SpecErr.Error() != j.SpecErr.Error()) {
			s.log.Warn("job opts in with invalid meta; not managing it", "job", key.String(), "error", j.SpecErr)
		}
		if len(j.Spec.Warnings) > 0 && (cur == nil || !slices.Equal(cur.Spec.Warnings, j.Spec.Warnings)) {
			s.log.Warn("job meta has keys the planner ignores", "job", key.String(), "warnings", strings.Join(j.Spec.Warnings, "; "))
		}
		s.mu.Lock()
		s.jobs[key] = j
		s.mu.Unlock()
		changed = true
	}
	s.mu.Lock()
	for key := range s.jobs {
		if !seen[key] {
			delete(s.jobs, key)
			changed = true
		}
	}
	first := !s.synced[0]
	s.synced[0] = true
	s.mu.Unlock()
	if changed || first {
		s.notify()
	}
	return qm.LastIndex, nil
}

func (s *Source) pollAllocs(ctx context.Context, index uint64) (uint64, error) {
	q := s.query(ctx, index)
	// The allocated device IDs tell live packing which GPU each worker holds.
	q.Params = map[string]string{"resources": "true"}
	stubs, qm, err := s.cfg.Client.Allocations().List(q)
	if err != nil {
		return 0, err
	}
	byJob := map[JobKey][]*nomadapi.AllocationListStub{}
	for _, a := range stubs {
		k := JobKey{Namespace: a.Namespace, ID: a.JobID}
		byJob[k] = append(byJob[k], a)
	}
	for _, list := range byJob {
		sort.Slice(list, func(i, j int) bool { return list[i].CreateIndex > list[j].CreateIndex })
	}
	s.mu.Lock()
	s.allocs = byJob
	s.synced[1] = true
	s.mu.Unlock()
	s.notify()
	return qm.LastIndex, nil
}

func (s *Source) pollNodes(ctx context.Context, index uint64) (uint64, error) {
	q := s.query(ctx, index)
	q.Namespace = ""
	q.Params = map[string]string{"resources": "true"}
	stubs, qm, err := s.cfg.Client.Nodes().List(q)
	if err != nil {
		return 0, err
	}
	nodes := make([]Node, 0, len(stubs))
	for _, n := range stubs {
		nodes = append(nodes, nodeFromStub(n, s.cfg.Device))
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	s.mu.Lock()
	s.nodes = nodes
	s.synced[2] = true
	s.mu.Unlock()
	s.notify()
	return qm.LastIndex, nil
}

// ScaleStatus reads a job's scaling status and events (the planner's own
// record of why a group is at zero survives a leader change there).
func (s *Source) ScaleStatus(ctx context.Context, key JobKey) (*nomadapi.JobScaleStatusResponse, error) {
	q := (&nomadapi.QueryOptions{Namespace: key.Namespace}).WithContext(ctx)
	st, _, err := s.cfg.Client.Jobs().ScaleStatus(key.ID, q)
	if err != nil {
		return nil, fmt.Errorf("reading scale status of %s: %w", key, err)
	}
	return st, nil
}
