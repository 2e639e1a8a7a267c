package manager

import (
	"testing"

	"github.com/shoenig/test/must"
)

// TestScaleMessage: a growth names its marginal gain; a shrink names its
// cause (the reclaiming queue, or the jobs it makes room for) and never a
// gain, not even the 0 the policy leaves on a job kept at its minimum.
func TestScaleMessage(t *testing.T) {
	cases := []struct {
		name      string
		a         Action
		want, not []string
	}{
		{"growth", Action{Kind: KindScale, From: 1, To: 2, Gain: 537, Saving: 40,
			Reason: "marginal gain: +1 worker saves 537 s per dominant share; 2 workers, 1 ps"},
			[]string{"scale 1 -> 2, marginal gain 537 s per unit share", "predicted 40 s sooner", ": +1 worker saves 537 s"}, nil},
		{"room for a newcomer", Action{Kind: KindScale, From: 2, To: 1, Gain: 0, Saving: -30, RoomFor: "elastic-c",
			Reason: "minimum 1 workers; one more would shorten it, but the GPUs went to jobs that save more time per share"},
			[]string{"scale 2 -> 1 to make room for elastic-c", "predicted 30 s later for this job"},
			[]string{"marginal gain", "more would not shorten it", " 0 s"}},
		{"reclaim", Action{Kind: KindScale, From: 4, To: 2, Gain: 537, ReclaimedBy: "team-a",
			Reason: "marginal gain: +1 worker saves 537 s per dominant share; 2 workers, 1 ps"},
			[]string{"scale 4 -> 2 (reclaimed by queue team-a"},
			[]string{"537", "marginal gain", "saves"}},
		{"reclaim with servers", Action{Kind: KindScale, From: 4, To: 2, PSGroup: "ps", PSFrom: 2, PSTo: 1, ReclaimedBy: "team-a"},
			[]string{"scale workers 4 -> 2, parameter servers 2 -> 1 (reclaimed by queue team-a"}, []string{"marginal gain"}},
		{"suspended for a newcomer", Action{Kind: KindSuspend, From: 1, To: 0, RoomFor: "b, c"},
			[]string{"suspend 1 -> 0 to make room for b, c"}, []string{"time-slicing"}},
		{"shrink of no cause", Action{Kind: KindScale, From: 3, To: 2, Reason: "max speed-up reached"},
			[]string{"scale 3 -> 2: max speed-up reached"}, []string{"marginal gain"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := scaleMessage(c.a)
			for _, w := range c.want {
				must.StrContains(t, msg, w)
			}
			for _, n := range c.not {
				must.StrNotContains(t, msg, n)
			}
		})
	}
}

// TestNoteRoomFor: a shrink that is not a reclaim names the jobs waiting
// for placement and those that grow in the same round; a reclaim keeps its
// queue, and a round without either names no one.
func TestNoteRoomFor(t *testing.T) {
	as := []Action{
		{Job: "default/a", Kind: KindScale, From: 2, To: 1},
		{Job: "default/b", Kind: KindScale, From: 2, To: 1, ReclaimedBy: "q"},
		{Job: "team/c", Kind: KindStart, From: 0, To: 1},
		{Job: "default/d", Kind: KindScale, From: 1, To: 2},
	}
	noteRoomFor(as, []string{"e"})
	must.Eq(t, "e, team/c, d", as[0].RoomFor)
	must.Eq(t, "", as[1].RoomFor)
	must.Eq(t, "", as[2].RoomFor)

	alone := []Action{{Job: "default/a", Kind: KindScale, From: 2, To: 1}}
	noteRoomFor(alone, nil)
	must.Eq(t, "", alone[0].RoomFor)
}
