package manager

import (
	"time"

	"github.com/caravan-nomad/caravan/planner/service/source"
)

// Verdict is why one candidate of a round was taken or refused: a closed
// set, so the API, the web page and tests switch on it instead of reading
// sentences.
type Verdict string

const (
	VerdictApplied          Verdict = "applied"           // the change was written to Nomad
	VerdictUnchanged        Verdict = "unchanged"         // the policy kept the job's shape
	VerdictCooldown         Verdict = "cooldown"          // held: changed too recently
	VerdictRestartCost      Verdict = "restart-cost"      // held: the saving would not repay a restart
	VerdictRateLimit        Verdict = "rate-limit"        // deferred: max_changes_per_round reached
	VerdictConflict         Verdict = "conflict"          // the job changed under the planner: decided again next round
	VerdictNomadRefused     Verdict = "nomad-refused"     // Nomad refused this (or the last) write: retried later
	VerdictWriteFailed      Verdict = "write-failed"      // the write failed: decided again next round
	VerdictSuspendForbidden Verdict = "suspend-forbidden" // the job's meta forbids suspension
	VerdictDryRun           Verdict = "dry-run"           // would apply, but the planner runs in dry-run
	VerdictNotLeader        Verdict = "not-leader"        // would apply, but this instance does not lead
	VerdictNoFit            Verdict = "no-fit"            // held at 0: Nomad's plan cannot place the job whole
)

// Verdicts lists every verdict, for documentation and exhaustive tests.
var Verdicts = []Verdict{VerdictApplied, VerdictUnchanged, VerdictCooldown, VerdictRestartCost,
	VerdictRateLimit, VerdictConflict, VerdictNomadRefused, VerdictWriteFailed, VerdictSuspendForbidden,
	VerdictDryRun, VerdictNotLeader, VerdictNoFit}

// Taken reports whether the candidate's change went (or would go, in
// dry-run or on a follower) to Nomad.
func (v Verdict) Taken() bool { return v == VerdictApplied }

// Candidate is one job the round considered, what the policy proposed for
// it, and the verdict.
type Candidate struct {
	Job     string  `json:"job"` // namespace/id
	Kind    Kind    `json:"kind,omitempty"`
	From    int     `json:"from"`
	To      int     `json:"to"` // what the policy proposed
	PSFrom  int     `json:"ps_from,omitempty"`
	PSTo    int     `json:"ps_to,omitempty"`
	Gain    float64 `json:"gain"`
	Verdict Verdict `json:"verdict"`
	// Detail is the human-readable part (the policy's reason, the error).
	Detail string `json:"detail,omitempty"`

	key source.JobKey
}

// Decision is one action the planner took on a job, kept for the job's
// timeline on the web page.
type Decision struct {
	Time    time.Time `json:"time"`
	Kind    Kind      `json:"kind"`
	From    int       `json:"from"`
	To      int       `json:"to"`
	PSFrom  int       `json:"ps_from,omitempty"`
	PSTo    int       `json:"ps_to,omitempty"`
	Gain    float64   `json:"gain"`
	Saving  float64   `json:"saving_seconds,omitempty"`
	Verdict Verdict   `json:"verdict"`
	Reason  string    `json:"reason"`
}

// maxDecisions bounds the timeline kept per job.
const maxDecisions = 100

// verdictOf maps an action's status after apply to its verdict.
func verdictOf(a *Action) Verdict {
	switch a.Status {
	case StatusApplied:
		return VerdictApplied
	case StatusConflict:
		return VerdictConflict
	case StatusFailed:
		return VerdictWriteFailed
	}
	if a.verdict != "" {
		return a.verdict
	}
	return VerdictWriteFailed
}

// settle copies the actions' verdicts into the round's candidates and
// appends them to the jobs' timelines. Called with m.mu held.
func (m *Manager) settle(r *Round) {
	for i := range r.Actions {
		a := &r.Actions[i]
		v := verdictOf(a)
		found := false
		for j := range r.Candidates {
			c := &r.Candidates[j]
			if c.key == a.key {
				c.Kind, c.Verdict, found = a.Kind, v, true
				if a.Error != "" {
					c.Detail = a.Error + "; " + a.Reason
				}
			}
		}
		if !found {
			r.Candidates = append(r.Candidates, Candidate{Job: a.Job, key: a.key, Kind: a.Kind, From: a.From, To: a.To,
				PSFrom: a.PSFrom, PSTo: a.PSTo, Gain: a.Gain, Verdict: v, Detail: a.Reason})
		}
		if v == VerdictDryRun || v == VerdictNotLeader {
			continue // nothing happened: every round would repeat it
		}
		h := append(m.history[a.key], Decision{Time: r.Time, Kind: a.Kind, From: a.From, To: a.To, PSFrom: a.PSFrom,
			PSTo: a.PSTo, Gain: a.Gain, Saving: a.Saving, Verdict: v, Reason: a.Reason})
		if len(h) > maxDecisions {
			h = h[len(h)-maxDecisions:]
		}
		m.history[a.key] = h
	}
}

// History returns the planner's decisions on a job, oldest first, as this
// instance saw them (a new leader starts empty; Nomad's scaling events
// keep the durable record).
func (m *Manager) History(namespace, id string) []Decision {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Decision(nil), m.history[source.JobKey{Namespace: namespace, ID: id}]...)
}
