package planner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// teamPolicies applies the shipped Nomad policies (scale-only and
// register) narrowed to the team namespaces, as their headers say to do
// (namespace "*" becomes one block per namespace the queues manage), and
// mints a token holding only them.
func teamPolicies(t *testing.T, a *harness.Agent, namespaces ...string) string {
	t.Helper()
	var policies []string
	for _, file := range []string{"planner-nomad.policy.hcl", "planner-nomad-register.policy.hcl"} {
		pol := readFile(t, filepath.Join(a.C.Root, "jobspecs", "acl", file))
		must.StrContains(t, pol, `namespace "*" {`)
		for _, ns := range namespaces {
			name := strings.TrimSuffix(file, ".policy.hcl") + "-" + ns
			path := filepath.Join(t.TempDir(), name+".hcl")
			must.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(pol, `namespace "*" {`, fmt.Sprintf("namespace %q {", ns))), 0o600))
			_, err := a.C.CLI(t, "acl", "policy", "apply", name, path)
			must.NoError(t, err)
			policies = append(policies, name)
		}
	}
	return mintToken(t, a, "caravan-planner-queues", policies...)
}

// submitSim registers jobspecs/planner-train-sim.nomad.hcl with vars in
// namespace ns (with the agent's management token); stopped and purged
// when the test ends.
func submitSim(t *testing.T, c *harness.C, ns, id string, vars ...string) {
	t.Helper()
	args := []string{"job", "run", "-output", "-var", "name=" + id, "-var", "caravan_bin=" + filepath.Join(c.Root, "build", "caravan"),
		"-var", "state_dir=" + c.CheckpointDir, "-var", "shares=2"}
	for _, v := range vars {
		args = append(args, "-var", v)
	}
	out, err := c.CLI(t, append(args, filepath.Join(c.Root, "jobspecs", "planner-train-sim.nomad.hcl"))...)
	must.NoError(t, err)
	var doc struct{ Job nomadapi.Job }
	must.NoError(t, json.Unmarshal([]byte(out), &doc))
	doc.Job.Namespace = &ns
	_ = os.RemoveAll(filepath.Join(c.CheckpointDir, ns+"-"+id))
	_, _, err = c.Nomad.Jobs().Register(&doc.Job, &nomadapi.WriteOptions{Namespace: ns})
	must.NoError(t, err)
	t.Cleanup(func() {
		_, _, _ = c.Nomad.Jobs().Deregister(id, true, &nomadapi.WriteOptions{Namespace: ns})
	})
}

// TestPlanner_QueuesUnderACL runs the planner with team queues on an
// ACL-enabled Nomad, with a token of the shipped policies narrowed to the
// two team namespaces (no management token, no other namespace). One
// SIMULATED GPU of 4 shares, half guaranteed to each team. Team B's gang
// (2 workers of 2 shares) borrows A's half; team A submits a 1-worker job
// at 0. The planner reads both namespaces, suspends B for team-a (a scale,
// its event naming the queue), checks A's start with Nomad's plan (the dry
// run needs submit-job) and starts it (a scale): nothing is refused and no
// capability is reported missing.
func TestPlanner_QueuesUnderACL(t *testing.T) {
	c := harness.Cluster(t)
	a := harness.NewACLAgent(t, c, "acl", 4)
	ac := a.C
	teamNamespaces(t, ac)
	token := teamPolicies(t, a, "team-a", "team-b")
	// The narrowed token reaches the teams' namespaces and no other.
	cfg := nomadapi.DefaultConfig()
	cfg.Address, cfg.SecretID = ac.NomadAddr, token
	tc, err := nomadapi.NewClient(cfg)
	must.NoError(t, err)
	_, _, err = tc.Jobs().List(&nomadapi.QueryOptions{Namespace: "team-a"})
	must.NoError(t, err)
	_, _, err = tc.Jobs().List(&nomadapi.QueryOptions{Namespace: "default"})
	must.ErrorContains(t, err, "403")

	p := startACLPlanner(t, ac, "queues-acl", token, `queue "team-a" {
  namespaces = ["team-a"]
  guarantee  = "0.5"
}
queue "team-b" {
  namespaces = ["team-b"]
  guarantee  = "0.5"
}
`)

	run := time.Now().Unix() % 1000000
	idB, idA := fmt.Sprintf("qacl-b-%d", run), fmt.Sprintf("qacl-a-%d", run)
	submitSim(t, ac, "team-b", idB, "count=2", "min_workers=2", "max_workers=2", "gang=true")
	b := &nsJob{t: t, c: ac, ns: "team-b", id: idB}
	b.waitWorkers("2 (one GPU, half of it borrowed)", 2*time.Minute, func(n int) bool { return n == 2 })

	submitSim(t, ac, "team-a", idA, "count=0", "min_workers=1", "max_workers=1")
	ja := &nsJob{t: t, c: ac, ns: "team-a", id: idA}
	ja.waitWorkers("1 (started by the planner)", 2*time.Minute, func(n int) bool { return n == 1 })
	must.Eq(t, 0, b.live("worker"), must.Sprint("team B's borrower still runs beside A's job"))
	evs := b.reclaimEvents("worker", "team-a")
	must.SliceNotEmpty(t, evs, must.Sprint("no scaling event on team B's job naming team-a"))
	t.Logf("under the narrowed shipped policies: team B suspended (%s); team A started", evs[0].Message)

	actions, err := p.actions()
	must.NoError(t, err)
	for _, act := range actions {
		must.NotEq(t, "refused", act.Status, must.Sprintf("%+v", act))
	}
	log, err := os.ReadFile(p.log)
	must.NoError(t, err)
	must.StrNotContains(t, string(log), "lacks an ACL capability")
	must.StrNotContains(t, string(log), "may not plan jobs", must.Sprint("team A's start was not checked by Nomad's plan"))
	must.StrNotContains(t, string(log), "fit not checked")
	must.StrContains(t, string(log), "team-a/"+idA, must.Sprint("the planner never acted on team A's job"))
}
