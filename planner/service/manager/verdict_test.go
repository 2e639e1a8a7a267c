package manager

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
)

func candidate(t *testing.T, r *Round, job string) Candidate {
	t.Helper()
	for _, c := range r.Candidates {
		if c.Job == job {
			return c
		}
	}
	t.Fatalf("no candidate %s in %+v", job, r.Candidates)
	return Candidate{}
}

func TestVerdicts_AppliedRateLimitCooldown(t *testing.T) {
	s := defaultSettings()
	s.MaxChangesPerRound = 1
	h := newHarness(t, s, 2)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "2"}))
	h.nomad.PutJob(fakenomad.TrainingJob("b", 1, map[string]string{"caravan_max_workers": "2"}))
	h.measuredAt("a", 1)
	h.measuredAt("b", 1)
	r := h.round()
	must.SliceLen(t, 2, r.Candidates)
	applied := r.Actions[0].Job
	deferred := r.Actions[1].Job
	must.Eq(t, VerdictApplied, candidate(t, r, applied).Verdict)
	must.True(t, candidate(t, r, applied).Verdict.Taken())
	c := candidate(t, r, deferred)
	must.Eq(t, VerdictRateLimit, c.Verdict)
	must.Eq(t, 1, c.From)
	must.Eq(t, 2, c.To)
	must.StrContains(t, c.Detail, "rate limit")

	hist := h.mgr.History("default", "a")
	if applied != "default/a" {
		hist = h.mgr.History("default", "b")
	}
	must.SliceLen(t, 1, hist)
	must.Eq(t, VerdictApplied, hist[0].Verdict)
	must.Eq(t, 2, hist[0].To)

	// Next round: the applied job is in its cooldown, the other applied.
	r = h.round()
	must.Eq(t, VerdictApplied, candidate(t, r, deferred).Verdict)
	must.SliceContains(t, []Verdict{VerdictCooldown, VerdictUnchanged}, candidate(t, r, applied).Verdict)
}

func TestVerdicts_NomadRefusedAndDryRun(t *testing.T) {
	h := newHarness(t, defaultSettings(), 2)
	h.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "4"}))
	h.measuredAt("a", 2)
	calls := 0
	h.writer = rejectingWriter{calls: &calls}
	r := h.round()
	must.Eq(t, VerdictNomadRefused, candidate(t, r, "default/a").Verdict)
	r = h.round()
	must.Eq(t, VerdictNomadRefused, candidate(t, r, "default/a").Verdict)
	must.SliceLen(t, 2, h.mgr.History("default", "a"))

	s := defaultSettings()
	s.DryRun = true
	d := newHarness(t, s, 2)
	d.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "4"}))
	d.measuredAt("a", 2)
	r = d.round()
	must.Eq(t, VerdictDryRun, candidate(t, r, "default/a").Verdict)
	must.SliceEmpty(t, d.mgr.History("default", "a"))
}
