package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/caravan-nomad/caravan/planner/service/clock"
)

// Identity is who a verified workload identity token says the caller is.
type Identity struct {
	Namespace    string `json:"nomad_namespace"`
	JobID        string `json:"nomad_job_id"`
	AllocationID string `json:"nomad_allocation_id"`
	Task         string `json:"nomad_task"`
	// Unverified marks claims accepted without a check: the Nomad agent
	// enforces no ACLs, so nothing can vouch for them (online.go). The
	// caller then requires the allocation to be a live one of the job.
	Unverified bool `json:"-"`
}

// ErrUnauthenticated wraps every reason a token is refused.
var ErrUnauthenticated = errors.New("unauthenticated")

// Verifier checks Nomad workload identity JWTs against the cluster's JWKS.
type Verifier struct {
	Keys     *KeySet
	Clock    clock.Clock
	Audience string // required in aud when set
	Issuer   string // required as iss when set
	// Leeway tolerates clock skew on exp/nbf/iat.
	Leeway time.Duration
}

type claims struct {
	Identity
	Issuer    string          `json:"iss"`
	Audience  json.RawMessage `json:"aud"`
	Expiry    *float64        `json:"exp"`
	NotBefore *float64        `json:"nbf"`
	IssuedAt  *float64        `json:"iat"`
}

func unauth(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnauthenticated, fmt.Sprintf(format, args...))
}

// Verify checks the token's signature, time window, audience and issuer, and
// returns the workload it identifies. Errors wrap ErrUnauthenticated, except
// failures to reach the JWKS, which callers should report as 503.
func (v *Verifier) Verify(ctx context.Context, token string) (Identity, error) {
	// go-jose parses the compact JWS, allows only the algorithms Nomad
	// signs with (so never "none" or an HMAC), and in Verify refuses a
	// header whose crit names an extension it does not implement
	// (RFC 7515 section 4.1.11).
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.RS256, jose.EdDSA})
	if err != nil {
		return Identity{}, unauth("token is not a compact JWS signed with RS256 or EdDSA: %v", err)
	}
	if len(jws.Signatures) != 1 {
		return Identity{}, unauth("token has %d signatures, want 1", len(jws.Signatures))
	}
	hdr := jws.Signatures[0].Header
	key, err := v.Keys.Key(ctx, hdr.KeyID)
	if err != nil {
		if errors.Is(err, ErrUnknownKey) {
			return Identity{}, unauth("%v", err)
		}
		return Identity{}, err
	}
	if hdr.Algorithm != key.alg {
		return Identity{}, unauth("token algorithm %q does not match key %q (%s)", hdr.Algorithm, hdr.KeyID, key.alg)
	}
	payload, err := jws.Verify(key.key)
	switch {
	case errors.Is(err, jose.ErrUnsupportedCriticalHeader):
		return Identity{}, unauth("token header marks an extension critical (crit) that the planner does not implement")
	case err != nil:
		return Identity{}, unauth("bad token signature")
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return Identity{}, unauth("token payload is not JSON")
	}
	now := v.Clock.Now()
	at := func(f float64) time.Time { return time.Unix(0, int64(f*1e9)) }
	if c.Expiry == nil {
		// A token that never expires is a credential forever: Nomad's
		// identities with a ttl carry exp (and are renewed in place).
		return Identity{}, unauth("token has no exp claim: give the task's planner identity a ttl")
	}
	if now.After(at(*c.Expiry).Add(v.Leeway)) {
		return Identity{}, unauth("token expired at %s", at(*c.Expiry).UTC().Format(time.RFC3339))
	}
	if c.NotBefore != nil && now.Add(v.Leeway).Before(at(*c.NotBefore)) {
		return Identity{}, unauth("token not valid before %s", at(*c.NotBefore).UTC().Format(time.RFC3339))
	}
	if v.Issuer != "" && c.Issuer != v.Issuer {
		return Identity{}, unauth("token issuer %q is not %q", c.Issuer, v.Issuer)
	}
	if v.Audience != "" && !hasAudience(c.Audience, v.Audience) {
		return Identity{}, unauth("token audience does not include %q", v.Audience)
	}
	if c.JobID == "" || c.AllocationID == "" || c.Namespace == "" {
		return Identity{}, unauth("token is not a workload identity (no job, allocation or namespace claim)")
	}
	return c.Identity, nil
}

// hasAudience handles aud as a string or a list of strings (RFC 7519).
func hasAudience(raw json.RawMessage, want string) bool {
	if len(raw) == 0 {
		return false
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one == want
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		for _, a := range many {
			if a == want {
				return true
			}
		}
	}
	return false
}
