package ingest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/planner/service/clock"
)

// OnlineChecker verifies a workload identity by asking Nomad: it reads the
// job's Nomad Variables path (nomad/jobs/<job>, in the namespace of the
// token's claims) with the token. Nomad grants that read to a workload
// identity of the job (and only of a live allocation: it treats the claims
// of a terminal allocation as expired), so the read succeeds (200, or 404
// when the job has no variable) exactly when Nomad accepts the token as the
// job's identity, and answers 403 to a forged token, another job's token
// and a stopped allocation's. It works on every Nomad from 1.4 on, JWKS or
// not (Nomad 1.6 publishes none).
//
// An agent without ACLs checks no token at all: then claims are accepted
// unverified (Identity.Unverified) and the checker warns loudly, or refuses
// them when RefuseWithoutACLs is set (planner/README.md says why).
type OnlineChecker struct {
	Client *nomadapi.Client
	Clock  clock.Clock
	Logger hclog.Logger
	// TTL bounds how long an answer is reused for the same token (and how
	// often the agent's ACL enforcement is probed again).
	TTL time.Duration
	// MaxEntries bounds the cache (tokens, not bytes: a key is a hash).
	MaxEntries int
	// Leeway tolerates clock skew on exp/nbf.
	Leeway time.Duration
	// RefuseWithoutACLs refuses every token when the agent enforces no
	// ACLs, instead of accepting unverified claims with a warning.
	RefuseWithoutACLs bool

	mu        sync.Mutex
	cache     map[[32]byte]onlineEntry
	aclsAt    time.Time
	aclsOn    bool
	warnedAt  time.Time
	aclsProbe sync.Mutex // one probe at a time
}

type onlineEntry struct {
	id      Identity
	err     error
	expires time.Time
}

// Defaults of OnlineChecker.
const (
	DefaultOnlineTTL        = 30 * time.Second
	DefaultOnlineMaxEntries = 4096
)

// aclProbeToken is sent to see whether the agent checks tokens: it is
// neither an ACL token nor a JWT, so an agent with ACLs refuses it (403).
const aclProbeToken = "caravan-acl-probe"

// Verify checks token online and returns the workload it identifies.
// Errors wrap ErrUnauthenticated, except failures to reach Nomad.
func (o *OnlineChecker) Verify(ctx context.Context, token string) (Identity, error) {
	c, err := peekClaims(token)
	if err != nil {
		return Identity{}, err
	}
	now := o.Clock.Now()
	if err := checkTimes(c, now, o.Leeway); err != nil {
		return Identity{}, err
	}
	key := sha256.Sum256([]byte(token))
	if e, ok := o.cached(key, now); ok {
		return e.id, e.err
	}
	on, err := o.aclsEnforced(ctx)
	if err != nil {
		return Identity{}, err
	}
	if !on {
		return o.unverified(c.Identity, now)
	}
	id, err := o.ask(ctx, c.Identity, token)
	if err == nil || errors.Is(err, ErrUnauthenticated) {
		o.remember(key, onlineEntry{id: id, err: err, expires: now.Add(o.ttl())}, now)
	}
	return id, err
}

// ask reads nomad/jobs/<job> with the token; 200 and 404 both mean Nomad
// let the token read it.
func (o *OnlineChecker) ask(ctx context.Context, id Identity, token string) (Identity, error) {
	q := (&nomadapi.QueryOptions{Namespace: id.Namespace, AuthToken: token, AllowStale: true}).WithContext(ctx)
	_, _, err := o.Client.Variables().Peek("nomad/jobs/"+id.JobID, q)
	var ue nomadapi.UnexpectedResponseError
	switch {
	case err == nil:
		return id, nil
	case errors.As(err, &ue) && (ue.StatusCode() == 403 || ue.StatusCode() == 401):
		return Identity{}, unauth("Nomad refused the token as job %s/%s's identity (forged, expired, another job's, or of a stopped allocation)",
			id.Namespace, id.JobID)
	default:
		return Identity{}, fmt.Errorf("checking the token with Nomad: %w", err)
	}
}

func (o *OnlineChecker) unverified(id Identity, now time.Time) (Identity, error) {
	if o.RefuseWithoutACLs {
		return Identity{}, unauth("Nomad enforces no ACLs, so no token can be verified, and progress.refuse_without_acls is set")
	}
	o.mu.Lock()
	warn := now.Sub(o.warnedAt) >= o.ttl()
	if warn {
		o.warnedAt = now
	}
	o.mu.Unlock()
	if warn {
		o.Logger.Error("INSECURE: Nomad enforces no ACLs: progress reports are accepted on their token's unverified claims; "+
			"anyone who can reach the planner can report for any job (enable Nomad ACLs, or set progress.refuse_without_acls)",
			"job", id.Namespace+"/"+id.JobID, "allocation_id", id.AllocationID)
	}
	id.Unverified = true
	return id, nil
}

// aclsEnforced probes (at most once per TTL) whether the agent refuses a
// token that is not one.
func (o *OnlineChecker) aclsEnforced(ctx context.Context) (bool, error) {
	o.aclsProbe.Lock()
	defer o.aclsProbe.Unlock()
	now := o.Clock.Now()
	o.mu.Lock()
	fresh, on := !o.aclsAt.IsZero() && now.Sub(o.aclsAt) < o.ttl(), o.aclsOn
	o.mu.Unlock()
	if fresh {
		return on, nil
	}
	q := (&nomadapi.QueryOptions{AuthToken: aclProbeToken, AllowStale: true}).WithContext(ctx)
	_, _, err := o.Client.Variables().Peek("nomad/jobs/"+aclProbeToken, q)
	var ue nomadapi.UnexpectedResponseError
	switch {
	case err == nil:
		on = false
	case errors.As(err, &ue) && (ue.StatusCode() == 403 || ue.StatusCode() == 401):
		on = true
	default:
		return false, fmt.Errorf("probing whether Nomad enforces ACLs: %w", err)
	}
	o.mu.Lock()
	if o.aclsAt.IsZero() || on != o.aclsOn {
		o.Logger.Info("probed Nomad's token checks", "acls_enforced", on)
	}
	o.aclsAt, o.aclsOn = now, on
	o.mu.Unlock()
	return on, nil
}

func (o *OnlineChecker) ttl() time.Duration {
	if o.TTL > 0 {
		return o.TTL
	}
	return DefaultOnlineTTL
}

func (o *OnlineChecker) cached(key [32]byte, now time.Time) (onlineEntry, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.cache[key]
	if !ok || !now.Before(e.expires) {
		return onlineEntry{}, false
	}
	return e, true
}

// remember stores an answer; a full cache first drops expired entries,
// then (still full) an arbitrary one.
func (o *OnlineChecker) remember(key [32]byte, e onlineEntry, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cache == nil {
		o.cache = map[[32]byte]onlineEntry{}
	}
	limit := o.MaxEntries
	if limit <= 0 {
		limit = DefaultOnlineMaxEntries
	}
	if _, ok := o.cache[key]; !ok && len(o.cache) >= limit {
		for k, old := range o.cache {
			if !now.Before(old.expires) {
				delete(o.cache, k)
			}
		}
		for k := range o.cache {
			if len(o.cache) < limit {
				break
			}
			delete(o.cache, k)
		}
	}
	o.cache[key] = e
}

// cacheLen is the number of cached answers (tests).
func (o *OnlineChecker) cacheLen() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.cache)
}
