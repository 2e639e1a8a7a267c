package adversarial

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// plKeyMaxAge is the planner's progress.jwks_max_age in the key test: the
// product's bound is 5 minutes; the test shortens it so it need not wait.
const plKeyMaxAge = 10 * time.Second

// A task's planner identity is signed with Nomad's root key; the operator
// rotates the key and removes the old one, as for a leaked key (`nomad
// operator root keyring rotate -now`, then `remove -force`). Expected: the token signed with the removed key,
// verified before (403: valid, but of a job the planner does not manage),
// is refused with 401 within progress.jwks_max_age of the removal, while a
// token signed with the new key is still verified. Before, the planner
// re-read the JWKS only for an unknown key ID, so a removed key verified
// tokens forever. The test runs its own Nomad agent, since rotating the
// shared cluster's keyring would change every other test's tokens.
//
// On an agent without these features (Nomad 1.6 has no JWKS; keyring
// `-now`/`-force` came in 1.8.3) it skips; planner/service
// TestAgent_RemovedSigningKeyIsRefused backs the claim there.
func TestPlanner_RemovedSigningKeyIsRefused(t *testing.T) {
	c := harness.Cluster(t)
	const covered = "planner/service TestAgent_RemovedSigningKeyIsRefused"
	harness.NeedsFeature(t, c, harness.FeatureJWKS, covered)
	harness.NeedsFeature(t, c, harness.FeatureNamedIdentities, covered)
	harness.NeedsFeature(t, c, harness.FeatureKeyringNowForce, covered)
	a := harness.NewAgent(t, c, "keyring", 2)
	a.Start(t, a.PluginConfig(harness.OneSimulatedGPU, "enabled = true"))
	a.WaitNode(t, 2*time.Minute)
	p := plStartWith(t, a.C, "keyring", plOpts{extra: fmt.Sprintf("progress {\n  jwks_max_age = %q\n}\n", plKeyMaxAge)})
	sample := `{"step": 1, "loss": 1, "samples_per_sec": 1}`

	old := a.C.RunJob(t, "e2e/adversarial/testdata/planner-identity.nomad.hcl", "name=adv-key-old", "named=true", "ttl=1h")
	oldToken := plAgentToken(t, a, old, "hold")
	oldKid := plKid(t, oldToken)
	harness.Eventually(t, time.Minute, func() error {
		code, eb, err := p.post(oldToken, sample)
		if err != nil {
			return err
		}
		if code != http.StatusForbidden {
			return fmt.Errorf("token of the current key: HTTP %d %s, want 403", code, eb.Error)
		}
		return nil
	})

	_, err := a.C.CLI(t, "operator", "root", "keyring", "rotate", "-now") // as for a leaked key
	must.NoError(t, err)
	harness.Eventually(t, time.Minute, func() error {
		if kid := plActiveKid(t, a); kid == oldKid || kid == "" {
			return fmt.Errorf("the active key is still %q", kid)
		}
		return nil
	})
	// A task started now gets a token of the new key (before the removal:
	// with the key its node identity was signed with gone, the agent's
	// client cannot place new work).
	fresh := a.C.RunJob(t, "e2e/adversarial/testdata/planner-identity.nomad.hcl", "name=adv-key-new", "named=true", "ttl=1h")
	newToken := plAgentToken(t, a, fresh, "hold")
	must.NotEq(t, oldKid, plKid(t, newToken))
	// -force: Nomad refuses to remove a key that signed a live workload
	// identity otherwise (as this one did).
	_, err = a.C.CLI(t, "operator", "root", "keyring", "remove", "-force", oldKid)
	must.NoError(t, err)
	removed := time.Now()

	var took time.Duration
	harness.Eventually(t, plKeyMaxAge+30*time.Second, func() error {
		code, eb, err := p.post(oldToken, sample)
		if err != nil {
			return err
		}
		if code != http.StatusUnauthorized {
			return fmt.Errorf("token of the removed key %s: HTTP %d %s, want 401", oldKid, code, eb.Error)
		}
		must.StrContains(t, eb.Error, "unknown signing key")
		took = time.Since(removed)
		return nil
	})
	t.Logf("token of removed key %s refused %s after `keyring remove` (jwks_max_age %s)", oldKid, took.Round(100*time.Millisecond), plKeyMaxAge)
	must.Less(t, plKeyMaxAge+5*time.Second, took)

	code, eb, err := p.post(newToken, sample)
	must.NoError(t, err)
	must.Eq(t, http.StatusForbidden, code, must.Sprint(eb.Error))
}

// plAgentToken reads the progress identity of a running task of job on a
// standalone agent (its allocations live under the agent's data_dir).
func plAgentToken(t *testing.T, a *harness.Agent, job, task string) string {
	t.Helper()
	var token string
	harness.Eventually(t, 2*time.Minute, func() error {
		allocs, _, err := a.C.Nomad.Jobs().Allocations(job, false, nil)
		if err != nil {
			return err
		}
		for _, al := range allocs {
			if al.ClientStatus != "running" {
				continue
			}
			if token = plSecretsToken(filepath.Join(a.Dir, "data", "alloc", al.ID, task, "secrets")); token != "" {
				return nil
			}
		}
		return fmt.Errorf("no running allocation of %s with a planner token yet", job)
	})
	return token
}

// plKid is a JWT's key ID (no verification: the test only looks).
func plKid(t *testing.T, token string) string {
	t.Helper()
	hdr, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	must.NoError(t, err)
	var h struct {
		Kid string `json:"kid"`
	}
	must.NoError(t, json.Unmarshal(hdr, &h))
	must.NotEq(t, "", h.Kid)
	return h.Kid
}

// plActiveKid is the ID of the agent's active root key.
func plActiveKid(t *testing.T, a *harness.Agent) string {
	t.Helper()
	keys, _, err := a.C.Nomad.Keyring().List(nil)
	must.NoError(t, err)
	for _, k := range keys {
		if k.State == "active" {
			return k.KeyID
		}
	}
	return ""
}
