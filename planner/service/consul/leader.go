package consul

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"

	"github.com/caravan-nomad/caravan/planner/service/clock"
	"github.com/caravan-nomad/caravan/planner/service/retry"
)

// ElectorConfig configures leader election.
type ElectorConfig struct {
	Client *consulapi.Client
	Key    string
	// ID is written as the lock's value, so anyone can see who leads.
	ID string
	// CheckID, when set, ties the session to the service's health check.
	CheckID    string
	SessionTTL time.Duration
	// LockDelay after a session is invalidated; 0 disables it. Writes to
	// Nomad enforce job modify indexes, so a deposed leader's late write
	// cannot land on a job that changed since it decided.
	LockDelay time.Duration
	// BeforeSession, if set, runs before each session is created (the
	// Registrar's Ensure: a session on a lost check cannot be created).
	BeforeSession func(context.Context) error
	Clock         clock.Clock
	Logger        hclog.Logger
}

// Elector campaigns for leadership until its context ends.
type Elector struct {
	cfg ElectorConfig
	log hclog.Logger

	mu      sync.Mutex
	leader  bool
	since   time.Time
	changes chan bool
	// confirmed is when the session was last known alive: the start of the
	// last request that created or renewed it. Leadership counts only while
	// it is younger than the session TTL (the fence: Consul invalidates the
	// session no sooner than one TTL after the last renewal, so another
	// instance cannot lead before this one stops writing).
	confirmed time.Time
}

// NewElector returns an elector; call Run.
func NewElector(cfg ElectorConfig) *Elector {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Elector{cfg: cfg, log: cfg.Logger.Named("leader"), changes: make(chan bool, 8)}
}

// IsLeader reports whether this instance holds the lock and confirmed its
// session within the last TTL. A leader cut off from Consul (frozen,
// partitioned) stops being one here, before Consul could elect another.
func (e *Elector) IsLeader() bool {
	return !e.LeaseUntil().IsZero()
}

// LeaseUntil is when this instance's leadership stops being confirmed (zero
// when it does not lead now). A write to Nomad must finish before it.
func (e *Elector) LeaseUntil() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	until := e.confirmed.Add(e.cfg.SessionTTL)
	if !e.leader || !e.cfg.Clock.Now().Before(until) {
		return time.Time{}
	}
	return until
}

func (e *Elector) confirm(at time.Time) {
	e.mu.Lock()
	if at.After(e.confirmed) {
		e.confirmed = at
	}
	e.mu.Unlock()
}

// Changes receives true when leadership is gained and false when lost.
func (e *Elector) Changes() <-chan bool { return e.changes }

func (e *Elector) set(v bool) {
	e.mu.Lock()
	changed := e.leader != v
	e.leader = v
	if changed {
		e.since = e.cfg.Clock.Now()
	}
	e.mu.Unlock()
	if changed {
		if v {
			e.log.Info("acquired leadership", "key", e.cfg.Key)
		} else {
			e.log.Warn("lost leadership", "key", e.cfg.Key)
		}
		select {
		case e.changes <- v:
		default:
		}
	}
}

// Leader reads who holds the lock now ("" if nobody).
func (e *Elector) Leader(ctx context.Context) (string, error) {
	pair, _, err := e.cfg.Client.KV().Get(e.cfg.Key, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("reading leader key: %w", err)
	}
	if pair == nil || pair.Session == "" {
		return "", nil
	}
	return string(pair.Value), nil
}

// Run campaigns until ctx ends, then releases the lock. It never returns an
// error other than ctx.Err(): Consul being unreachable means following, with
// backoff, until it is back.
func (e *Elector) Run(ctx context.Context) error {
	b := retry.New(500*time.Millisecond, 10*time.Second)
	for ctx.Err() == nil {
		err := e.campaign(ctx)
		e.set(false)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			e.log.Warn("leader election failed, backing off", "error", err)
		}
		if b.Wait(ctx, e.cfg.Clock) != nil {
			break
		}
	}
	return ctx.Err()
}

// createSession creates the lock's session. It writes the request itself
// because consul/api drops a zero LockDelay (which Consul then reads as its
// 15 s default), and a lock delay makes a follower that races the old
// leader's invalidation wait consul/api's 5 s retry.
func (e *Elector) createSession(ctx context.Context) (string, error) {
	body := map[string]any{
		"Name":       "caravan-planner " + e.cfg.ID,
		"TTL":        e.cfg.SessionTTL.String(),
		"Behavior":   consulapi.SessionBehaviorRelease,
		"LockDelay":  e.cfg.LockDelay.String(),
		"NodeChecks": []string{"serfHealth"},
	}
	if e.cfg.CheckID != "" {
		body["ServiceChecks"] = []consulapi.ServiceCheck{{ID: e.cfg.CheckID}}
	}
	var out struct{ ID string }
	if _, err := e.cfg.Client.Raw().Write("/v1/session/create", body, &out, (&consulapi.WriteOptions{}).WithContext(ctx)); err != nil {
		return "", fmt.Errorf("creating session: %w", err)
	}
	if out.ID == "" {
		return "", errors.New("creating session: consul returned no session ID")
	}
	return out.ID, nil
}

// campaign acquires the lock once and holds it until it is lost or ctx ends.
func (e *Elector) campaign(ctx context.Context) error {
	if e.cfg.BeforeSession != nil {
		if err := e.cfg.BeforeSession(ctx); err != nil {
			return err
		}
	}
	started := e.cfg.Clock.Now()
	session, err := e.createSession(ctx)
	if err != nil {
		return err
	}
	e.confirm(started)
	renewCtx, stopRenew := context.WithCancel(ctx)
	renewErr := make(chan error, 1)
	go func() { renewErr <- e.renew(renewCtx, session) }()
	defer func() {
		stopRenew()
		<-renewErr
		e.destroy(session)
	}()

	lock, err := e.cfg.Client.LockOpts(&consulapi.LockOptions{
		Key:            e.cfg.Key,
		Value:          []byte(e.cfg.ID),
		Session:        session,
		MonitorRetries: 3,
		LockWaitTime:   15 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("building lock: %w", err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			close(stop)
		case <-done:
		}
	}()
	lost, err := lock.Lock(stop)
	if err != nil {
		return fmt.Errorf("acquiring lock %s: %w", e.cfg.Key, err)
	}
	if lost == nil { // stopped before acquiring
		return nil
	}
	e.set(true)
	select {
	case <-ctx.Done():
		e.set(false)
		if err := lock.Unlock(); err != nil && !errors.Is(err, consulapi.ErrLockNotHeld) {
			e.log.Warn("releasing lock", "error", err)
		}
		return nil
	case <-lost:
		e.set(false)
		_ = lock.Unlock()
		return errors.New("lock lost")
	case err := <-renewErr:
		renewErr <- err // for the deferred wait
		e.set(false)
		_ = lock.Unlock()
		return fmt.Errorf("session renewal stopped: %w", err)
	}
}

// renew renews the session every third of its TTL, each attempt bounded by
// that third, and records each confirmation. It returns when the session is
// gone, when it could not be confirmed for a whole TTL, or when ctx ends.
func (e *Elector) renew(ctx context.Context, session string) error {
	every := e.cfg.SessionTTL / 3
	last := e.cfg.Clock.Now()
	wait := every
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.cfg.Clock.After(wait):
		}
		started := e.cfg.Clock.Now()
		rctx, cancel := context.WithTimeout(ctx, every)
		entry, _, err := e.cfg.Client.Session().Renew(session, (&consulapi.WriteOptions{}).WithContext(rctx))
		cancel()
		switch {
		case err == nil && entry == nil:
			return consulapi.ErrSessionExpired
		case err == nil:
			e.confirm(started)
			last, wait = started, every
		case ctx.Err() != nil:
			return ctx.Err()
		case e.cfg.Clock.Now().Sub(last) >= e.cfg.SessionTTL:
			return fmt.Errorf("session not confirmed for %s: %w", e.cfg.SessionTTL, err)
		default:
			e.log.Warn("session renewal failed; retrying", "error", err)
			wait = time.Second
		}
	}
}

// destroy ends the session (best effort, bounded: Consul may be away).
func (e *Elector) destroy(session string) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.SessionTTL/3)
	defer cancel()
	if _, err := e.cfg.Client.Session().Destroy(session, (&consulapi.WriteOptions{}).WithContext(ctx)); err != nil {
		e.log.Debug("destroying session", "error", err)
	}
}

// AlwaysLeader is the elector used without Consul: a single instance that
// always leads.
type AlwaysLeader struct{}

func (AlwaysLeader) IsLeader() bool { return true }
