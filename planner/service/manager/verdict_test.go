package manager

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/planner/service/servicetest/fakenomad"
)

func TestVerdicts_AppliedRateLimitCooldown(t *testing.T) {
	h := rateLimitedPair(t)
	r := h.round()
	must.SliceLen(t, 2, r.Candidates)
	applied := r.Actions[0].Job
	deferred := r.Actions[1].Job
	must.Eq(t, VerdictApplied, candidateOf(t, r, applied).Verdict)
	must.True(t, candidateOf(t, r, applied).Verdict.Taken())
	c := candidateOf(t, r, deferred)
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
	must.Eq(t, VerdictApplied, candidateOf(t, r, deferred).Verdict)
	must.SliceContains(t, []Verdict{VerdictCooldown, VerdictUnchanged}, candidateOf(t, r, applied).Verdict)
}

func TestVerdicts_NomadRefusedAndDryRun(t *testing.T) {
	h, _ := refusedGrowth(t)
	r := h.round()
	must.Eq(t, VerdictNomadRefused, candidateOf(t, r, "default/a").Verdict)
	r = h.round()
	must.Eq(t, VerdictNomadRefused, candidateOf(t, r, "default/a").Verdict)
	must.SliceLen(t, 2, h.mgr.History("default", "a"))

	s := defaultSettings()
	s.DryRun = true
	d := newHarness(t, s, 2)
	d.nomad.PutJob(fakenomad.TrainingJob("a", 1, map[string]string{"caravan_max_workers": "4"}))
	d.measuredAt("a", 2)
	r = d.round()
	must.Eq(t, VerdictDryRun, candidateOf(t, r, "default/a").Verdict)
	must.SliceEmpty(t, d.mgr.History("default", "a"))
}
