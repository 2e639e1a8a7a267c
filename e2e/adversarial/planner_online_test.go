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

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// The planner has Nomad check each progress token (it reads the job's
// Variables path nomad/jobs/<job> with it), which works on every agent,
// Nomad 1.6 included, where there is no JWKS. On an agent with ACLs, with
// the default workload identities the shipped jobspecs now use:
//   - the managed job's own token is accepted (204);
//   - a forged signature, and a token of another job whose claims were
//     edited to name the managed job, are refused by Nomad (401);
//   - another job's untouched token is verified, and refused because that
//     job is not managed (403);
//   - a token of a job with the managed job's name in another namespace is
//     refused (403: the planner manages the default namespace's job);
//   - the token of a stopped allocation of the managed job is refused.
//
// The test runs its own agent, since the shared cluster has no ACLs.
func TestPlanner_TokensCheckedByNomad(t *testing.T) {
	c := harness.Cluster(t)
	a := harness.NewACLAgent(t, c, "online", 5)
	p := plStartWith(t, a.C, "online", plOpts{env: []string{"NOMAD_TOKEN=" + a.C.Token}})
	sample := `{"step": 1, "loss": 1, "samples_per_sec": 1}`

	managed := plRunSim(t, a.C, "adv-online", "count=1", "max_workers=1")
	allocID, token := plAgentAllocToken(t, a, "default", managed, "train")
	post := func(token string) (int, string) {
		code, eb, err := p.post(token, sample)
		must.NoError(t, err)
		return code, eb.Error
	}
	harness.Eventually(t, time.Minute, func() error {
		if code, msg := post(token); code != http.StatusNoContent {
			return fmt.Errorf("own token: HTTP %d %s, want 204", code, msg)
		}
		return nil
	})

	other := a.C.RunJob(t, "e2e/adversarial/testdata/planner-identity.nomad.hcl", "name=adv-online-other")
	_, otherToken := plAgentAllocToken(t, a, "default", other, "hold")
	_, err := a.C.CLI(t, "namespace", "apply", "-description", "caravan e2e", "adv-elsewhere")
	must.NoError(t, err)
	elsewhere := a.C.RunJob(t, "e2e/adversarial/testdata/planner-identity.nomad.hcl", "name="+managed, "namespace=adv-elsewhere")
	_, elsewhereToken := plAgentAllocToken(t, a, "adv-elsewhere", elsewhere, "hold")

	parts := strings.Split(token, ".")
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	must.NoError(t, err)
	sig[0] ^= 0xff
	forged := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)
	claims := plClaims(t, otherToken)
	claims["nomad_job_id"], claims["nomad_allocation_id"] = managed, allocID
	body, err := json.Marshal(claims)
	must.NoError(t, err)
	oparts := strings.Split(otherToken, ".")
	renamed := oparts[0] + "." + base64.RawURLEncoding.EncodeToString(body) + "." + oparts[2]

	for _, tc := range []struct {
		name, token string
		code        int
		msg         string
	}{
		{"own token", token, http.StatusNoContent, ""},
		{"forged signature", forged, http.StatusUnauthorized, "Nomad refused the token"},
		{"another job's token renamed", renamed, http.StatusUnauthorized, "Nomad refused the token"},
		{"another job's token", otherToken, http.StatusForbidden, "not managed"},
		{"another namespace", elsewhereToken, http.StatusForbidden, "adv-elsewhere/" + managed + " is not managed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := post(tc.token)
			must.Eq(t, tc.code, code, must.Sprint(msg))
			must.StrContains(t, msg, tc.msg)
		})
	}

	// Stop the managed job's allocation (Nomad places a new one): its
	// token is refused from then on.
	_, err = a.C.CLI(t, "alloc", "stop", "-detach", allocID)
	must.NoError(t, err)
	harness.Eventually(t, time.Minute, func() error {
		code, msg := post(token)
		if code != http.StatusForbidden && code != http.StatusUnauthorized {
			return fmt.Errorf("stopped allocation's token: HTTP %d %s, want 403 or 401", code, msg)
		}
		return nil
	})
}

// plAgentAllocToken is a running allocation of job (in namespace ns) on a
// standalone agent, and the token its task reports with.
func plAgentAllocToken(t *testing.T, a *harness.Agent, ns, job, task string) (allocID, token string) {
	t.Helper()
	harness.Eventually(t, 2*time.Minute, func() error {
		allocs, _, err := a.C.Nomad.Jobs().Allocations(job, false, &nomadapi.QueryOptions{Namespace: ns})
		if err != nil {
			return err
		}
		for _, al := range allocs {
			if al.ClientStatus != "running" {
				continue
			}
			if token = plSecretsToken(filepath.Join(a.Dir, "data", "alloc", al.ID, task, "secrets")); token != "" {
				allocID = al.ID
				return nil
			}
		}
		return fmt.Errorf("no running allocation of %s/%s with a token yet", ns, job)
	})
	return allocID, token
}
