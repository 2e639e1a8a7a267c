package planner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/e2e/harness"
)

// plannerToken applies the shipped scale-only policy and mints a token
// holding only it.
func plannerToken(t *testing.T, a *harness.Agent) string {
	t.Helper()
	_, err := a.C.CLI(t, "acl", "policy", "apply", "caravan-planner",
		filepath.Join(a.C.Root, "jobspecs", "acl", "planner-nomad.policy.hcl"))
	must.NoError(t, err)
	return mintToken(t, a, "caravan-planner", "caravan-planner")
}

// mintToken creates a client token named name holding the (applied) ACL
// policies, and returns its secret.
func mintToken(t *testing.T, a *harness.Agent, name string, policies ...string) string {
	t.Helper()
	args := []string{"acl", "token", "create", "-name", name, "-json"}
	for _, p := range policies {
		args = append(args, "-policy", p)
	}
	out, err := a.C.CLI(t, args...)
	must.NoError(t, err)
	var tok struct{ SecretID string }
	must.NoError(t, json.Unmarshal([]byte(out), &tok))
	must.NotEq(t, "", tok.SecretID)
	return tok.SecretID
}

// startACLPlanner runs the planner against the ACL-enabled agent's cluster
// ac with token (its only Nomad credential), and waits until it leads.
// extra is appended to its config (e.g. queue blocks).
func startACLPlanner(t *testing.T, ac *harness.C, name, token, extra string) *instance {
	t.Helper()
	port := freePort(t)
	p := runPlanner(t, ac, name, port, fmt.Sprintf(`
log_level = "debug"
bind_addr = "127.0.0.1"
port      = %d
nomad {
  address       = %q
  blocking_wait = "30s"
}
consul {
  address        = %q
  service_id     = "caravan-planner-%s"
  lock_key       = "caravan/planner/%s-e2e"
  check_interval = "1s"
  session_ttl    = "10s"
}
policy {
  name         = "optimus"
  interval     = "3s"
  cooldown     = "10s"
  restart_cost = "5s"
}
capacity {
  device = "caravan/gpushare"
}
%s`, port, ac.NomadAddr, strings.TrimPrefix(ac.ConsulAddr, "http://"), name, name, extra), "NOMAD_TOKEN="+token)
	p.waitLeading(t)
	return p
}

type planAction struct {
	Job    string `json:"job"`
	Kind   string `json:"kind"`
	Status string `json:"status"`
	Error  string `json:"error"`
}

// actions are the actions of the planner's last round (GET /v1/plan).
func (in *instance) actions() ([]planAction, error) {
	var plan struct {
		Actions []planAction `json:"actions"`
	}
	err := harness.GetJSON(in.url+"/v1/plan", &plan)
	return plan.Actions, err
}

// TestPlanner_ScaleOnlyACL runs the planner on an ACL-enabled Nomad with a
// token of jobspecs/acl/planner-nomad.policy.hcl (scale-job and reads, no
// submit-job). A job failing with a user error is scaled to 0 (a scale:
// allowed); a converged job whose meta asks to be stopped needs a
// registration, which Nomad refuses: the plan shows the action refused,
// naming the capability, and the planner logs it once at error level.
// Consul has no ACLs here (the shared cluster's dev agent).
//
// An agent that ignores a scale's index (Nomad before 1.8.2, the test
// cluster's 1.6 included) has the planner change counts with registrations
// that enforce the index, which need submit-job: the scale-only policy is
// not enough there, and the test checks that instead
// (scaleOnlyWithoutScaleIndex). TestPlanner_QueuesUnderACL runs that
// registration path to success with both shipped policies.
func TestPlanner_ScaleOnlyACL(t *testing.T) {
	c := harness.Cluster(t)
	enforced, err := c.HasFeature(t, harness.FeatureScaleIndex)
	must.NoError(t, err)
	a := harness.NewACLAgent(t, c, "acl", 4)
	ac := a.C
	token := plannerToken(t, a)

	p := startACLPlanner(t, ac, "acl", token, "")

	bin := filepath.Join(ac.Root, "build", "caravan")
	sim := func(name string, vars ...string) string {
		_ = os.RemoveAll(filepath.Join(ac.CheckpointDir, "default-"+name))
		base := []string{"name=" + name, "caravan_bin=" + bin, "state_dir=" + ac.CheckpointDir, "shares=2",
			"count=1", "max_workers=1"}
		return ac.RunJob(t, "jobspecs/planner-train-sim.nomad.hcl", append(base, vars...)...)
	}
	failing := sim("acl-fail", "fail_exit=1")
	if !enforced {
		scaleOnlyWithoutScaleIndex(t, ac, p, failing)
		return
	}
	converging := sim("acl-conv", "b0=0.01", "target_loss=0.5", "stop_on_converge=true")

	// Scaling works under the scale-only policy.
	harness.Eventually(t, 3*time.Minute, func() error {
		for _, ev := range events(t, ac, failing) {
			if action(ev) == "user-error-stop" && !ev.Error {
				return nil
			}
		}
		return fmt.Errorf("no user-error-stop scaling event on %s yet", failing)
	})
	st, _, err := ac.Nomad.Jobs().ScaleStatus(failing, nil)
	must.NoError(t, err)
	must.Eq(t, 0, st.TaskGroups["worker"].Desired)

	// Stopping the converged job needs submit-job: refused, and said so.
	var refused planAction
	harness.Eventually(t, 3*time.Minute, func() error {
		actions, err := p.actions()
		if err != nil {
			return err
		}
		for _, act := range actions {
			if act.Job == "default/"+converging && act.Kind == "stop" && act.Status == "refused" {
				refused = act
				return nil
			}
		}
		return fmt.Errorf("no refused stop of %s yet: %+v", converging, actions)
	})
	must.StrContains(t, refused.Error, "needs the submit-job capability (policy jobspecs/acl/planner-nomad-register.policy.hcl)")
	job, _, err := ac.Nomad.Jobs().Info(converging, nil)
	must.NoError(t, err)
	must.False(t, job.Stop != nil && *job.Stop, must.Sprint("the scale-only token stopped the job"))
	b, err := os.ReadFile(p.log)
	must.NoError(t, err)
	must.Eq(t, 1, strings.Count(string(b), "lacks an ACL capability"), must.Sprint(harness.Tail(string(b), 40)))
}

// scaleOnlyWithoutScaleIndex is TestPlanner_ScaleOnlyACL on an agent that
// ignores a scale's index: the planner finds that out (its probe, a scale,
// is allowed) and then changes counts only with registrations enforcing the
// index, so the failing job's scale to 0 is refused naming submit-job and
// the add-on policy, and its count stays (no scale that could undo a
// concurrent edit is written instead).
func scaleOnlyWithoutScaleIndex(t *testing.T, ac *harness.C, p *instance, failing string) {
	t.Helper()
	var refused planAction
	harness.Eventually(t, 3*time.Minute, func() error {
		actions, err := p.actions()
		if err != nil {
			return err
		}
		for _, act := range actions {
			if act.Job == "default/"+failing && act.Status == "refused" {
				refused = act
				return nil
			}
		}
		return fmt.Errorf("no refused action on %s yet: %+v", failing, actions)
	})
	must.StrContains(t, refused.Error, "needs the submit-job capability (policy jobspecs/acl/planner-nomad-register.policy.hcl)")
	st, _, err := ac.Nomad.Jobs().ScaleStatus(failing, nil)
	must.NoError(t, err)
	must.Eq(t, 1, st.TaskGroups["worker"].Desired, must.Sprint("a count changed without submit-job on an agent that ignores the scale index"))
	b, err := os.ReadFile(p.log)
	must.NoError(t, err)
	must.StrContains(t, string(b), "Nomad ignores a scale's job modify index", must.Sprint(harness.Tail(string(b), 40)))
	must.StrContains(t, string(b), "lacks an ACL capability", must.Sprint(harness.Tail(string(b), 40)))
	t.Logf("the agent ignores a scale's index: the scale-only token's count change was refused (%s)", refused.Error)
}
