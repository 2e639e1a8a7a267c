package ingest

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// peekClaims decodes a compact JWS's payload without checking its
// signature: the online check (online.go) has Nomad check the signature,
// and needs the claims first to know which job and namespace to ask about.
// Nothing read here is trusted before that check passes.
func peekClaims(token string) (claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return claims{}, unauth("token is not a compact JWS (three dot-separated parts)")
	}
	body, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return claims{}, unauth("token payload is not base64url")
	}
	var c claims
	if err := json.Unmarshal(body, &c); err != nil {
		return claims{}, unauth("token payload is not JSON")
	}
	if c.JobID == "" || c.AllocationID == "" || c.Namespace == "" {
		return claims{}, unauth("token is not a workload identity (no job, allocation or namespace claim)")
	}
	return c, nil
}

// checkTimes checks exp and nbf when the token has them (a Nomad 1.6
// default identity has nbf and iat, no exp: Nomad then refuses it once its
// allocation is terminal).
func checkTimes(c claims, now time.Time, leeway time.Duration) error {
	at := func(f float64) time.Time { return time.Unix(0, int64(f*1e9)) }
	if c.Expiry != nil && now.After(at(*c.Expiry).Add(leeway)) {
		return unauth("token expired at %s", at(*c.Expiry).UTC().Format(time.RFC3339))
	}
	if c.NotBefore != nil && now.Add(leeway).Before(at(*c.NotBefore)) {
		return unauth("token not valid before %s", at(*c.NotBefore).UTC().Format(time.RFC3339))
	}
	return nil
}
